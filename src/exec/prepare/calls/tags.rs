//! Calls written in tags: `<function=NAME><parameter=KEY>VALUE</parameter>
//! </function>`, `<invoke name="NAME"><parameter name="KEY">…`, a
//! `<function=NAME>` element around a JSON object, `NAME<arg_key>K</arg_key>
//! <arg_value>V</arg_value>`, a `<function>NAME</function>` element beside
//! a JSON object, and wrapper elements (`<tool_call>`, `<function_calls>`,
//! `<minimax:tool_call>`, …) read again inside. Every element must be
//! closed: a value cut off mid-way is never completed.

use serde_json::{Map, Value};

use super::{read_in, Arguments, Found, Reading};
use crate::exec::{
    limits::ArgumentLimits,
    prepare::{json::literal, work},
};

/// Elements that are one call when they carry a name (`<function=NAME>`,
/// `<invoke name="NAME">`).
const CALL_TAGS: &[&str] =
    &["function", "invoke", "tool", "call", "tool_use", "use_tool", "function_call", "tool_call"];

/// Whether an element's tag names a call or a wrapper of calls
/// (`tool_call`, `function_calls`, `minimax:tool_call`).
fn is_call_element(tag: &str) -> bool {
    let tag = tag.rsplit(':').next().unwrap_or(tag).to_ascii_lowercase();
    CALL_TAGS.iter().any(|t| tag.trim_end_matches('s') == *t)
}

/// Elements holding one argument, named by `=KEY` or a `name` attribute.
const PARAMETER_TAGS: &[&str] = &["parameter", "param", "arg", "argument"];

/// Elements holding the arguments as a JSON object, beside a name element.
const ARGUMENTS_TAGS: &[&str] = &["arguments", "parameters", "args", "input"];

/// Elements holding a call's name as their text, beside its arguments.
const NAME_TAGS: &[&str] = &["function", "name", "tool_name", "tool"];

/// One element: its tag, `=VALUE` (`<function=get_weather>`), attributes,
/// the raw text inside and where it ends.
#[derive(Debug)]
struct Element<'a> {
    tag: &'a str,
    value: Option<String>,
    attributes: Vec<(&'a str, &'a str)>,
    inner: &'a str,
    end: usize,
}

impl Element<'_> {
    fn is(&self, tags: &[&str]) -> bool {
        tags.iter().any(|t| t.eq_ignore_ascii_case(self.tag))
    }

    /// The name `=NAME` or a `name`-like attribute gives.
    fn name(&self) -> Option<&str> {
        self.value.as_deref().or_else(|| name_attribute(&self.attributes))
    }
}

/// What searches of one text for elements found missing, so that none is
/// made twice: a text of many openers and no closer (`<a><a><a>…`, `<a <a
/// …`) would otherwise cost a search to its end for each opener. Places
/// are counted from the start of the text the searches walk forward in.
#[derive(Default)]
pub(super) struct Unclosed {
    /// No `>` at or after this place.
    angle: Option<usize>,
    /// No `</TAG>` starting at or after the place given with each tag.
    end_tags: Vec<(String, usize)>,
}

impl Unclosed {
    fn end_tag(&self, tag: &str) -> Option<usize> {
        self.end_tags.iter().find(|(t, _)| t == tag).map(|(_, at)| *at)
    }

    fn no_end_tag(&mut self, tag: &str, from: usize) {
        match self.end_tags.iter_mut().find(|(t, _)| t == tag) {
            Some((_, at)) => *at = (*at).min(from),
            None => self.end_tags.push((tag.to_owned(), from)),
        }
    }
}

/// The element `text` starts with, closed by its matching end tag; `text`
/// starts `base` bytes into the text `unclosed` is of. The bytes looked at
/// are charged to the meter.
fn element<'a>(text: &'a str, base: usize, unclosed: &mut Unclosed) -> Option<Element<'a>> {
    if work::spent() {
        return None;
    }
    let mut visited = 0;
    let found = element_unmetered(text, base, unclosed, &mut visited);
    work::charge(visited);
    found
}

/// Where `needle` is in `text[from..]` before the place `absent` (counted
/// from `text`'s start), after which it is known to be missing; `visited`
/// grows to the last byte looked at.
fn find_before(text: &str, from: usize, needle: &str, absent: Option<usize>, visited: &mut usize) -> Option<usize> {
    let end = absent.map_or(text.len(), |absent| (absent + needle.len()).saturating_sub(1).min(text.len()));
    let region = text.get(from..end.max(from))?;
    let found = region.find(needle);
    *visited = (*visited).max(found.map_or(end, |at| from + at + needle.len()));
    found.map(|at| from + at)
}

fn element_unmetered<'a>(
    text: &'a str,
    base: usize,
    unclosed: &mut Unclosed,
    visited: &mut usize,
) -> Option<Element<'a>> {
    let rest = text.strip_prefix('<')?;
    let tag_len = rest.find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ':' | '.')))?;
    *visited = 1 + tag_len;
    if tag_len == 0 {
        return None;
    }
    let tag = &rest[..tag_len];
    let relative = |absent: Option<usize>| absent.map(|at| at.saturating_sub(base));
    let Some(close) = find_before(text, 1, ">", relative(unclosed.angle), visited) else {
        unclosed.angle = Some(unclosed.angle.map_or(base + 1, |at| at.min(base + 1)));
        return None;
    };
    let head = &rest[tag_len..close - 1];
    let (value, attributes) = match head.strip_prefix('=') {
        Some(value) => (Some(unquote(value.trim()).to_owned()), Vec::new()),
        None => (None, attributes(head)?),
    };
    let body_start = close + 1;
    if head.trim_end().ends_with('/') {
        return Some(Element { tag, value, attributes, inner: "", end: body_start });
    }
    let (open, end_tag) = (format!("<{tag}"), format!("</{tag}>"));
    let mut depth = 1usize;
    let mut at = body_start;
    loop {
        let Some(next_close) = find_before(text, at, &end_tag, relative(unclosed.end_tag(tag)), visited) else {
            unclosed.no_end_tag(tag, base + at);
            return None;
        };
        let mut search = at;
        while let Some(found) = text[search..next_close].find(&open) {
            let found = search + found;
            let after = text[found + open.len()..].chars().next();
            if matches!(after, Some('>' | '=' | '/') | Some(' ' | '\n' | '\t')) {
                depth += 1;
            }
            search = found + open.len();
        }
        depth -= 1;
        if depth == 0 {
            return Some(Element {
                tag,
                value,
                attributes,
                inner: &text[body_start..next_close],
                end: next_close + end_tag.len(),
            });
        }
        at = next_close + end_tag.len();
    }
}

/// The attributes that name a call (`name`, `tool_name`, `function`):
/// the first one's value.
pub(super) fn name_attribute<'a>(attributes: &[(&str, &'a str)]) -> Option<&'a str> {
    attributes.iter().find(|(k, _)| is_name_attribute(k)).map(|(_, v)| *v)
}

/// Whether an attribute names a call rather than an argument.
pub(super) fn is_name_attribute(key: &str) -> bool {
    matches!(key, "name" | "tool_name" | "function")
}

/// `key="value" key='value' key=value`, or `None` for anything else.
pub(super) fn attributes(head: &str) -> Option<Vec<(&str, &str)>> {
    let mut found = Vec::new();
    let mut rest = head.trim().trim_end_matches('/').trim();
    while !rest.is_empty() {
        let eq = rest.find('=')?;
        let key = rest[..eq].trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ':')) {
            return None;
        }
        let after = rest[eq + 1..].trim_start();
        let (value, next) = match after.chars().next()? {
            q @ ('"' | '\'') => {
                let end = after[1..].find(q)?;
                (&after[1..1 + end], &after[1 + end + 1..])
            }
            _ => {
                let end = after.find(char::is_whitespace).unwrap_or(after.len());
                (&after[..end], &after[end..])
            }
        };
        found.push((key, value));
        rest = next.trim_start();
    }
    Some(found)
}

pub(super) fn unquote(text: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = text.strip_prefix(q).and_then(|t| t.strip_suffix(q)) {
            return inner;
        }
    }
    text
}

/// A part of a text in tags: an element, or text between elements.
enum Part<'a> {
    Element(Element<'a>),
    Text(&'a str),
}

/// The top-level parts of `text`; blank text between elements dropped.
fn parts(text: &str) -> Vec<Part<'_>> {
    let mut parts = Vec::new();
    let mut at = 0;
    let mut text_start = None;
    let mut unclosed = Unclosed::default();
    while at < text.len() {
        let rest = &text[at..];
        if rest.starts_with('<') {
            if let Some(found) = element(rest, at, &mut unclosed) {
                if let Some(start) = text_start.take() {
                    push_text(&mut parts, &text[start..at]);
                }
                at += found.end;
                parts.push(Part::Element(found));
                continue;
            }
        }
        text_start.get_or_insert(at);
        at += rest.chars().next().map_or(1, char::len_utf8);
    }
    if let Some(start) = text_start {
        push_text(&mut parts, &text[start..]);
    }
    parts
}

fn push_text<'a>(parts: &mut Vec<Part<'a>>, text: &'a str) {
    if !text.trim().is_empty() {
        parts.push(Part::Text(text));
    }
}

/// The calls `text`, starting with a tag, holds.
pub(super) fn read(text: &str, limits: ArgumentLimits, depth: usize) -> Reading {
    // Only parameters: the arguments of a call whose name was sent apart.
    if starts_parameters(text) {
        return match parameters(text) {
            Some(values) => Reading::One(Found { name: None, arguments: Arguments::Markup(values) }),
            None => Reading::Nothing,
        };
    }
    let parts = parts(text);
    if let Some(found) = name_beside_arguments(&parts, limits) {
        return Reading::One(found);
    }
    let mut calls = Vec::new();
    let mut count = 0;
    for part in parts {
        let Part::Element(element) = part else { return Reading::Nothing };
        match element_calls(element, limits, depth) {
            Reading::Nothing | Reading::AfterProse(_) | Reading::Words(_) => return Reading::Nothing,
            Reading::One(found) => {
                count += 1;
                calls.push(found);
            }
            Reading::Many(n) => count += n,
        }
    }
    match (count, calls.len()) {
        (1, 1) => Reading::One(calls.pop().expect("one")),
        (0, _) => Reading::Nothing,
        (n, _) => Reading::Many(n),
    }
}

/// The calls one element holds: a named call element, or a wrapper read
/// again inside.
fn element_calls(element: Element<'_>, limits: ArgumentLimits, depth: usize) -> Reading {
    // A thought holds no call: what it says is never run.
    if element.is(super::words::THOUGHT_TAGS) {
        return Reading::Nothing;
    }
    if element.is(CALL_TAGS) {
        if let Some(name) = element.name() {
            // Attributes beside the name are arguments (`location="Oslo"`,
            // `arguments='{…}'`): the general reading's, by the tool's
            // parameters; never dropped.
            if element.attributes.iter().any(|(key, _)| !is_name_attribute(key)) {
                return Reading::Nothing;
            }
            return match body_arguments(element.inner, limits) {
                Some(arguments) => Reading::One(Found { name: Some(name.to_owned()), arguments }),
                None => Reading::Nothing,
            };
        }
    }
    read_in(element.inner, limits, depth + 1)
}

/// `<function>NAME</function>` (or `<name>`) beside a JSON object, or
/// beside an `<arguments>` element holding one.
fn name_beside_arguments(parts: &[Part<'_>], limits: ArgumentLimits) -> Option<Found> {
    let [first, second] = parts else { return None };
    let (named, other) = match (first, second) {
        (Part::Element(e), other) if e.is(NAME_TAGS) && e.name().is_none() => (e, other),
        (other, Part::Element(e)) if e.is(NAME_TAGS) && e.name().is_none() => (e, other),
        _ => return None,
    };
    let name = named.inner.trim();
    if name.is_empty() || name.contains(|c: char| c.is_whitespace() || matches!(c, '<' | '{')) {
        return None;
    }
    let object = match other {
        Part::Text(text) => text.trim(),
        Part::Element(e) if e.is(ARGUMENTS_TAGS) && e.name().is_none() => e.inner.trim(),
        Part::Element(_) => return None,
    };
    literal(object, limits).filter(Value::is_object)?;
    Some(Found { name: Some(name.to_owned()), arguments: Arguments::Text(object.to_owned()) })
}

/// The arguments inside a named call element: none, a JSON object, or
/// parameter elements.
fn body_arguments(inner: &str, limits: ArgumentLimits) -> Option<Arguments> {
    let body = inner.trim();
    if body.is_empty() {
        return Some(Arguments::Absent);
    }
    if body.starts_with('{') {
        return literal(body, limits).filter(Value::is_object).map(|_| Arguments::Text(body.to_owned()));
    }
    parameters(body).map(Arguments::Markup)
}

/// Whether `text` starts with an argument written in tags.
pub(super) fn starts_parameters(text: &str) -> bool {
    ["<parameter", "<param=", "<param ", "<arg_key>", "<argument="].iter().any(|p| text.starts_with(p))
}

/// Arguments written as parameter elements (`<parameter=KEY>VALUE
/// </parameter>`, `<parameter name="KEY">`) or `<arg_key>`/`<arg_value>`
/// pairs, and nothing else; values are their text as written (the newline
/// on each side is layout: `prepare`'s markup stage reads it). A key given
/// twice is two readings: none.
pub(super) fn parameters(body: &str) -> Option<Map<String, Value>> {
    let mut values = Map::new();
    let mut pending_key: Option<String> = None;
    for part in parts(body) {
        let Part::Element(element) = part else { return None };
        let (key, value) = if element.is(PARAMETER_TAGS) {
            (element.name()?.to_owned(), element.inner)
        } else if element.tag == "arg_key" && pending_key.is_none() {
            pending_key = Some(element.inner.trim().to_owned());
            continue;
        } else if element.tag == "arg_value" {
            (pending_key.take()?, element.inner)
        } else {
            return None;
        };
        if pending_key.is_some() || key.is_empty() || values.contains_key(&key) {
            return None;
        }
        // As written: its layout is read with the tool's schema.
        values.insert(key, Value::String(value.to_owned()));
    }
    (pending_key.is_none() && !values.is_empty()).then_some(values)
}

/// The calls of the element `text` starts with, and where it ends; `None`
/// when it holds none.
/// `text` starts `base` bytes into the text `unclosed` is of.
pub(super) fn calls_at(
    text: &str,
    base: usize,
    limits: ArgumentLimits,
    unclosed: &mut Unclosed,
) -> Option<(usize, usize)> {
    let found = element(text, base, unclosed)?;
    let end = found.end;
    // A name alone in a call's element (`<tool_call>delete_marker</tool_call>`):
    // a call without arguments, whatever it names.
    let inner = found.inner.trim();
    let named = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':');
    if found.name().is_none() && is_call_element(found.tag) && !inner.is_empty() && inner.chars().all(named) {
        return Some((1, end));
    }
    match element_calls(found, limits, 0) {
        Reading::Nothing | Reading::AfterProse(_) | Reading::Words(_) => None,
        Reading::One(_) => Some((1, end)),
        Reading::Many(n) => Some((n, end)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Found {
        match read(text, ArgumentLimits::default(), 0) {
            Reading::One(found) => found,
            other => panic!("{text}: {other:?}"),
        }
    }

    fn values(pairs: &[(&str, &str)]) -> Arguments {
        Arguments::Markup(pairs.iter().map(|(k, v)| (k.to_string(), Value::String(v.to_string()))).collect())
    }

    #[test]
    fn parameter_elements_and_json_bodies() {
        let qwen = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";
        assert_eq!(
            one(qwen),
            Found { name: Some("get_weather".into()), arguments: values(&[("city", "\nParis\n"), ("days", "\n3\n")]) }
        );
        let minimax = "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n</invoke>\n</minimax:tool_call>";
        assert_eq!(one(minimax), Found { name: Some("get_weather".into()), arguments: values(&[("city", "Paris")]) });
        let llama = "<function=get_weather>{\"city\": \"Paris\"}</function>";
        assert_eq!(one(llama).arguments, Arguments::Text("{\"city\": \"Paris\"}".into()));
        let hermes = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
        assert_eq!(one(hermes).name.as_deref(), Some("get_weather"));
        let beside = "<function>get_weather</function>\n{\"city\": \"Paris\"}";
        assert_eq!(one(beside).arguments, Arguments::Text("{\"city\": \"Paris\"}".into()));
        // A value keeps inner newlines and markup.
        let code = "<function=write><parameter=text>\na <b>\nc\n</parameter></function>";
        assert_eq!(one(code).arguments, values(&[("text", "\na <b>\nc\n")]));
    }

    #[test]
    fn what_is_not_one_call() {
        let limits = ArgumentLimits::default();
        // Two calls.
        let two = "<tool_call><function=a></function></tool_call><tool_call><function=b></function></tool_call>";
        assert_eq!(read(two, limits, 0), Reading::Many(2));
        // Cut off: never completed.
        assert_eq!(read("<function=get_weather><parameter=city>Par", limits, 0), Reading::Nothing);
        assert_eq!(read("<function=get_weather><parameter=city>Paris</parameter>", limits, 0), Reading::Nothing);
        // A key twice, prose beside the call, an element that is not a call.
        assert_eq!(
            read("<function=f><parameter=a>1</parameter><parameter=a>2</parameter></function>", limits, 0),
            Reading::Nothing
        );
        assert_eq!(read("Sure! <function=f></function>", limits, 0), Reading::Nothing);
        assert_eq!(read("<b>bold</b>", limits, 0), Reading::Nothing);
    }
}
