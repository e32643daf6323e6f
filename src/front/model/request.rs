//! A request body as the door reads it: the few members it acts on,
//! borrowed from the body as their JSON text, and nothing else. Whatever
//! else a request carries (`messages` above all) is skipped by the parser
//! without a tree and forwarded as the body's bytes: a body costs about its
//! size, not the tree of its values (a 16 MiB body of tiny values was about
//! a gigabyte as a tree). The members are read when asked for, each
//! leniently (a `stream` that is not `true` is no stream; the upstream
//! says what is wrong with a request).
//!
//! `tools` stays text here too: [`super::tools`] weighs it before it makes
//! a tree of it.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

/// The members of a request the door reads (a member named twice is
/// refused: the door and the upstream could read two different ones).
#[derive(Deserialize)]
pub(super) struct Asked<'a> {
    #[serde(borrow)]
    model: Option<&'a RawValue>,
    #[serde(borrow)]
    stream: Option<&'a RawValue>,
    #[serde(borrow)]
    tools: Option<&'a RawValue>,
    #[serde(borrow)]
    tool_choice: Option<&'a RawValue>,
    #[serde(borrow)]
    parallel_tool_calls: Option<&'a RawValue>,
    #[serde(borrow)]
    response_format: Option<&'a RawValue>,
    /// Responses: `text.format` asks for structured output.
    #[serde(borrow)]
    text: Option<&'a RawValue>,
    /// Responses: a conversation stored upstream.
    #[serde(borrow)]
    previous_response_id: Option<&'a RawValue>,
    #[serde(borrow)]
    conversation: Option<&'a RawValue>,
    /// Messages: structured output (`output_format`).
    #[serde(borrow)]
    output_format: Option<&'a RawValue>,
}

/// Messages' `tool_choice`: its type, and whether parallel calls are off.
#[derive(Deserialize)]
struct Choice {
    #[serde(rename = "type")]
    kind: Option<String>,
    disable_parallel_tool_use: Option<bool>,
}

/// Responses' `text`: its `format`.
#[derive(Deserialize)]
struct Text {
    format: Option<Typed>,
}

/// A member's `type`, when it is an object with one.
#[derive(Deserialize)]
struct Typed {
    #[serde(rename = "type")]
    kind: Option<String>,
}

impl<'a> Asked<'a> {
    /// `body` read, or what the caller is told: not a JSON object, or a
    /// member the door reads named twice.
    pub(super) fn read(body: &'a [u8]) -> Result<Self, String> {
        serde_json::from_slice(body).map_err(|err| match err.to_string() {
            why if why.starts_with("duplicate field") => {
                let field = why.split('`').nth(1).unwrap_or("a member");
                format!("the request body names '{field}' twice")
            }
            _ => "the request body is not a JSON object".to_owned(),
        })
    }

    /// `model`, when it is a string.
    pub(super) fn model(&self) -> Option<String> {
        self.model.and_then(|raw| serde_json::from_str(raw.get()).ok())
    }

    /// Whether the answer is asked for as a stream (`stream: true`).
    pub(super) fn stream(&self) -> bool {
        self.stream.is_some_and(|raw| raw.get() == "true")
    }

    /// The declared tools' JSON text, when the request has any.
    pub(super) fn tools(&self) -> Option<&'a RawValue> {
        self.tools.filter(|raw| raw.get() != "null")
    }

    /// Whether the request forbids parallel calls
    /// (`parallel_tool_calls: false`, Messages'
    /// `tool_choice.disable_parallel_tool_use: true`).
    pub(super) fn one_call_only(&self) -> bool {
        let choice = self.tool_choice.and_then(|raw| serde_json::from_str::<Choice>(raw.get()).ok());
        self.parallel_tool_calls.is_some_and(|raw| raw.get() == "false")
            || choice.and_then(|c| c.disable_parallel_tool_use) == Some(true)
    }

    /// Whether the request asks for structured output (`response_format`,
    /// Responses' `text.format` or Messages' `output_format`, of type `json_schema` or
    /// `json_object`): a JSON answer is the answer.
    pub(super) fn structured(&self) -> bool {
        let typed = self.response_format.and_then(|raw| serde_json::from_str::<Typed>(raw.get()).ok());
        let format = self.text.and_then(|raw| serde_json::from_str::<Text>(raw.get()).ok()).and_then(|t| t.format);
        let output = self.output_format.and_then(|raw| serde_json::from_str::<Typed>(raw.get()).ok());
        typed
            .into_iter()
            .chain(format)
            .chain(output)
            .filter_map(|typed| typed.kind)
            .any(|kind| kind == "json_schema" || kind == "json_object")
    }

    /// Whether the conversation is stored upstream (Responses'
    /// `previous_response_id` or `conversation`, not null).
    pub(super) fn stored(&self) -> bool {
        [self.previous_response_id, self.conversation].into_iter().flatten().any(|raw| raw.get() != "null")
    }

    /// Whether `tool_choice` is `"none"` (Messages: `{type: none}`): the
    /// model may call no tool.
    pub(super) fn no_tools(&self) -> bool {
        let Some(raw) = self.tool_choice else { return false };
        let named = serde_json::from_str::<Cow<'_, str>>(raw.get()).is_ok_and(|c| c == "none");
        let typed = serde_json::from_str::<Choice>(raw.get()).ok().and_then(|c| c.kind).is_some_and(|k| k == "none");
        named || typed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_doors_members_are_read_and_the_rest_is_skipped() {
        let body = br#"{"messages": [{"role": "user", "content": [[[{"x": 1}]]]}], "model": "m\u0031", "stream": true,
            "tools": [{"type": "function"}], "tool_choice": "none", "user": {"a": [1, 2.5e3, null]},
            "parallel_tool_calls": false, "response_format": {"type": "json_schema", "json_schema": {}}}"#;
        let asked = Asked::read(body).unwrap();
        assert_eq!(asked.model().as_deref(), Some("m1"));
        assert!(asked.stream() && asked.no_tools() && asked.one_call_only() && asked.structured());
        assert_eq!(asked.tools().map(RawValue::get), Some(r#"[{"type": "function"}]"#));
    }

    #[test]
    fn members_of_other_types_read_as_absent() {
        let asked =
            Asked::read(br#"{"model": 7, "stream": "yes", "tools": null, "tool_choice": {"type": "auto"}}"#).unwrap();
        assert_eq!(asked.model(), None);
        assert!(!asked.stream() && !asked.no_tools() && asked.tools().is_none());
        assert!(!asked.one_call_only() && !asked.structured());
    }

    #[test]
    fn the_messages_and_responses_members_are_read() {
        let messages = Asked::read(br#"{"tool_choice": {"type": "none"}, "output_format": {"type": "json_schema"}}"#);
        let messages = messages.unwrap();
        assert!(messages.no_tools() && messages.structured() && !messages.stored());
        let one = Asked::read(br#"{"tool_choice": {"type": "auto", "disable_parallel_tool_use": true}}"#).unwrap();
        assert!(one.one_call_only() && !one.no_tools());
        let responses =
            Asked::read(br#"{"text": {"format": {"type": "json_object"}}, "previous_response_id": "resp_1"}"#).unwrap();
        assert!(responses.structured() && responses.stored());
        assert!(!Asked::read(br#"{"conversation": null, "text": {"format": {"type": "text"}}}"#).unwrap().stored());
    }

    #[test]
    fn a_member_named_twice_and_a_body_that_is_no_object_are_refused() {
        let twice = Asked::read(br#"{"model": "a", "messages": [], "model": "b"}"#).err();
        assert_eq!(twice.as_deref(), Some("the request body names 'model' twice"));
        for body in [&b"[1]"[..], b"{\"model\": ", b"not json"] {
            assert_eq!(Asked::read(body).err().as_deref(), Some("the request body is not a JSON object"));
        }
    }

    #[test]
    fn a_deep_member_the_door_does_not_read_is_skipped_without_a_stack() {
        let deep = format!(r#"{{"messages": {}{}, "model": "m"}}"#, "[".repeat(200_000), "]".repeat(200_000));
        assert_eq!(Asked::read(deep.as_bytes()).unwrap().model().as_deref(), Some("m"));
    }
}
