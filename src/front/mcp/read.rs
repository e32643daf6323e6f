//! One JSON-RPC message as every MCP door reads it (a streamable HTTP POST's
//! body, a line of `mcp-stdio`), before the transport parses it: JSON (else
//! -32700), one object (a batch is refused, -32600: both eras forbid them),
//! and for `tools/call` a name that is a string and arguments that are an
//! object or the arguments' JSON text (else -32602).
//!
//! Read once, without building a tree: members are kept as their raw text.
//! A `tools/call`'s arguments are taken out of the message as the text the
//! core parses ([`SentArguments`], as emitted: an object's text byte for
//! byte, a string's content), so neither the door nor the transport ever
//! builds a tree of them; the core holds them to the argument limits before
//! parsing. What is left of any message, the transport's to parse, is at
//! most [`MAX_MESSAGE_BYTES`].

use bytes::Bytes;
use serde_json::{value::RawValue, Value};

use super::SentArguments;

/// The largest message beside a `tools/call`'s arguments (every other
/// member, and every other message whole). MCP's messages are a few
/// hundred bytes; the transport parses what is left into a tree.
pub(crate) const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// A message as [`read`] left it.
pub(crate) struct Message {
    /// What the transport is given.
    pub(crate) bytes: Bytes,
    /// A `tools/call`'s arguments, taken out.
    pub(crate) arguments: Option<SentArguments>,
    /// An `initialize`.
    pub(crate) initialize: bool,
}

/// Why a message is not given to the transport.
#[derive(Debug, PartialEq)]
pub(crate) enum Unreadable {
    /// A JSON-RPC error to answer: the request's id (null when unknown),
    /// the code and the message.
    Rpc { id: Value, code: i64, message: String },
    /// Past [`MAX_MESSAGE_BYTES`] beside a call's arguments.
    TooLarge,
}

impl Unreadable {
    /// What the caller is told of a message past the size.
    pub(crate) fn too_large_message() -> String {
        format!("a JSON-RPC message is at most {} KiB beside a tools/call's arguments", MAX_MESSAGE_BYTES / 1024)
    }
}

/// A JSON object's members as their raw text.
type Members<'a> = std::collections::BTreeMap<String, &'a RawValue>;

/// `bytes` read as one message (see the module's comment).
pub(crate) fn read(bytes: Bytes) -> Result<Message, Unreadable> {
    let rpc = |id: Value, code: i64, message: String| Unreadable::Rpc { id, code, message };
    let raw: &RawValue = match serde_json::from_slice(&bytes) {
        Ok(raw) => raw,
        Err(err) => return Err(rpc(Value::Null, -32700, format!("Parse error: {err}"))),
    };
    let Ok(mut members) = serde_json::from_str::<Members<'_>>(raw.get()) else {
        let why = match raw.get().starts_with('[') {
            true => "Invalid Request: batches are not supported",
            false => "Invalid Request: a JSON-RPC message is an object",
        };
        return Err(rpc(Value::Null, -32600, why.to_owned()));
    };
    let method = members.get("method").and_then(|m| serde_json::from_str::<String>(m.get()).ok());
    if method.as_deref() != Some("tools/call") {
        let initialize = method.as_deref() == Some("initialize");
        return match bytes.len() <= MAX_MESSAGE_BYTES {
            true => Ok(Message { bytes, arguments: None, initialize }),
            false => Err(Unreadable::TooLarge),
        };
    }
    let id = members.get("id").and_then(|id| serde_json::from_str::<Value>(id.get()).ok()).unwrap_or(Value::Null);
    let invalid = |why: &str| rpc(id.clone(), -32602, format!("Invalid params: {why}"));
    let Some(mut params) = members.get("params").and_then(|p| serde_json::from_str::<Members<'_>>(p.get()).ok()) else {
        return Err(invalid("tools/call needs params with the tool's name"));
    };
    if !params.get("name").is_some_and(|name| name.get().starts_with('"')) {
        return Err(invalid("tools/call needs the tool's name, a string"));
    }
    let sent = params.remove("arguments");
    let arguments = match sent.map(RawValue::get) {
        None | Some("null") => String::new(),
        Some(object) if object.starts_with('{') => object.to_owned(),
        Some(text) if text.starts_with('"') => serde_json::from_str::<String>(text).expect("a JSON string"),
        Some(_) => return Err(invalid("arguments must be an object (or the arguments' JSON text)")),
    };
    if bytes.len() - sent.map_or(0, |a| a.get().len()) > MAX_MESSAGE_BYTES {
        return Err(Unreadable::TooLarge);
    }
    let params = RawValue::from_string(serde_json::to_string(&params).expect("raw JSON serialises"))
        .expect("serialised members are JSON");
    members.insert("params".to_owned(), &params);
    let rest = serde_json::to_vec(&members).expect("raw JSON serialises");
    Ok(Message { bytes: Bytes::from(rest), arguments: Some(SentArguments(arguments)), initialize: false })
}
