//! The caller's tools as the general reading asks of them, and a call
//! being read against one of them.

use serde_json::{Map, Value};

use super::super::{Arguments, Found};
use crate::{
    exec::{limits::ArgumentLimits, prepare::json::literal},
    similar::normalised_key,
};

/// A tool of the caller's, as the reading needs it.
#[derive(Clone, Copy)]
pub(crate) struct Tool<'a> {
    pub(crate) parameters: &'a [String],
    pub(crate) required: &'a [String],
    /// The parameters whose schema admits an array.
    pub(crate) lists: &'a [String],
}

/// What the reading asks of the caller's tools.
pub(crate) trait Anchor {
    /// The one tool of the caller's set `name` means (exact, alias, a
    /// drifted or wrapped name), if any. Never suggests.
    fn tool(&self, name: &str) -> Option<Tool<'_>>;

    /// Whether a name that begins with `key` (a normalised key,
    /// [`crate::similar::normalised_key`]) could still mean one of the
    /// caller's tools as more of it arrives. Unknown: yes.
    fn could_name(&self, key: &str) -> bool {
        let _ = key;
        true
    }
}

/// A call being read: of the tool `'a` (the anchor's), in the text `'t`.
pub(super) struct Frame<'t, 'a> {
    /// The name as written.
    pub(super) written: String,
    /// The tag that closes it (none: a name written as text, closed by the
    /// next closer).
    pub(super) tag: &'t str,
    pub(super) parameters: &'a [String],
    pub(super) required: &'a [String],
    pub(super) lists: &'a [String],
    pub(super) values: Map<String, Value>,
    /// A JSON body, as text.
    pub(super) body: Option<String>,
    /// The parameter being read: its name, its closing tag, where its value
    /// starts, and whether its value is JSON (`string="false"`).
    pub(super) open: Option<(String, &'t str, usize, bool, bool)>,
    /// An `<arg_key>` read, waiting for its `<arg_value>`.
    pub(super) key: Option<String>,
    /// Inside `<arg_key>`: where its text starts.
    pub(super) key_start: Option<usize>,
    /// Parameters given more than once, as the items of an array.
    pub(super) repeated: Vec<String>,
    /// Something in it is not a part of a call.
    pub(super) broken: bool,
}

impl<'t, 'a> Frame<'t, 'a> {
    pub(super) fn new(tool: Tool<'a>, written: &str, tag: &'t str) -> Self {
        Frame {
            written: written.to_owned(),
            tag,
            parameters: tool.parameters,
            required: tool.required,
            lists: tool.lists,
            values: Map::new(),
            body: None,
            open: None,
            key: None,
            key_start: None,
            repeated: Vec::new(),
            broken: false,
        }
    }

    /// The parameter a key written as markup names: itself, exactly (a key
    /// that only folds to one is two readings: the tool's, or another).
    pub(super) fn exact(&self, key: &str) -> Option<String> {
        self.parameters.iter().any(|p| p == key).then(|| key.to_owned())
    }

    /// The parameter a JSON key names: itself, or the one parameter it
    /// folds to (as the argument names stage repairs it).
    pub(super) fn parameter(&self, key: &str) -> Option<String> {
        if self.parameters.iter().any(|p| p == key) {
            return Some(key.to_owned());
        }
        let folded = normalised_key(key);
        let mut matches = self.parameters.iter().filter(|p| normalised_key(p) == folded);
        match (matches.next(), matches.next()) {
            (Some(one), None) => Some(one.clone()),
            _ => None,
        }
    }

    /// Sets a parameter's value. A key given twice breaks the call, but
    /// for a parameter whose schema admits an array: text given again
    /// (`<to>a</to><to>b</to>`) is its next item.
    pub(super) fn set(&mut self, key: String, value: Value) {
        let list = self.lists.contains(&key);
        match self.values.get_mut(&key) {
            None => {
                self.values.insert(key, value);
            }
            Some(held) if list && value.is_string() && (held.is_string() || self.repeated.contains(&key)) => {
                if let Value::String(first) = held {
                    *held = Value::Array(vec![Value::String(std::mem::take(first))]);
                    self.repeated.push(key);
                }
                if let Value::Array(items) = held {
                    items.push(value);
                }
            }
            Some(_) => self.broken = true,
        }
    }

    /// Ends the open parameter, its value running to `until`.
    pub(super) fn close_parameter(&mut self, text: &str, until: usize) {
        if let Some((key, _, start, json, _)) = self.open.take() {
            // As written: its layout is read with the tool's schema, where two
            // readings are held.
            let value = &text[start..until.max(start)];
            // The arguments as one object (`<arguments>{…}</arguments>`).
            if key.is_empty() {
                match self.body.is_none() && value.trim_start().starts_with('{') {
                    true => self.body = Some(value.trim().to_owned()),
                    false => self.broken = true,
                }
                return;
            }
            let value = match json {
                true => serde_json::from_str(value.trim()).unwrap_or_else(|_| Value::String(value.to_owned())),
                false => Value::String(value.to_owned()),
            };
            self.set(key, value);
        }
    }

    /// The call read, if it is complete.
    pub(super) fn found(mut self, limits: ArgumentLimits) -> Option<Found> {
        if self.broken || self.key.is_some() {
            return None;
        }
        let arguments = match self.body.take() {
            Some(body) if self.values.is_empty() => {
                let object = literal(&body, limits).filter(Value::is_object)?;
                let keys: Vec<String> = object.as_object()?.keys().cloned().collect();
                let mut seen = Map::new();
                for key in keys {
                    let parameter = self.parameter(&key)?;
                    if seen.insert(parameter, Value::Null).is_some() {
                        return None;
                    }
                }
                if !self.required.iter().all(|r| seen.contains_key(r)) {
                    return None;
                }
                Arguments::Text(body)
            }
            Some(_) => return None,
            None => {
                if !self.required.iter().all(|r| self.values.contains_key(r)) {
                    return None;
                }
                match self.values.is_empty() {
                    true => Arguments::Absent,
                    false => Arguments::Markup(self.values),
                }
            }
        };
        Some(Found { name: Some(self.written), arguments })
    }
}

/// `name` as a slice of `text`, where it is written there verbatim (the
/// memo of tools is keyed by slices of the text).
pub(super) fn text_of<'t>(text: &'t str, name: &str) -> Option<&'t str> {
    text.find(name).map(|at| &text[at..at + name.len()])
}

/// What an element inside a call holds.
pub(super) enum Parameter {
    /// A parameter (its name), and whether its value is JSON.
    Named(String, bool),
    Key,
    Value,
    Body,
}
