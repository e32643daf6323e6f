//! The general reading: a call read by its structure, anchored by the
//! caller's tools, when no family of syntax ([`super`]) reads it. Each new model family brings a template; what the
//! templates share is read here instead of each template:
//!
//! - **Markup, tokenised once**: elements with any tag name (a namespace in
//!   bars or before a colon set aside: `<｜DSML｜invoke>`, `<minimax:…>`),
//!   `=VALUE` or attributes, self-closing or not; a tag that lost its `<` at
//!   the start of a line; special tokens (`<|…|>`) and text between.
//! - **A call** is an element whose tag is a tool of the caller's
//!   (`<get_weather><city>Paris</city></get_weather>`,
//!   `<get_weather city="Paris"/>`), or an element whose `=VALUE` or `name`
//!   attribute is one (`<invoke name="get_weather">`, `<function=…>`), or,
//!   in text, a tool's name directly followed by its body (`call:NAME{key:
//!   "value"}`, `NAME(key="value")`).
//! - **Its arguments** are the children that name the tool's parameters:
//!   `<parameter name="K">`, `<parameter=K>`, `<K>v</K>`,
//!   `<arg_key>K</arg_key><arg_value>v</arg_value>`, attributes, a JSON
//!   object, or a body's `K: v`, `"K": v`, `K=v`. A parameter left open is
//!   closed by the next parameter or by its call's own end; one a wrapper's
//!   closer ends, and a call the end of the text cuts off, are never read.
//! - **Accepted only when unique and complete**: every markup key is a
//!   parameter (a JSON key may fold to exactly one), none given twice,
//!   every required parameter given, and nothing left over but residue:
//!   special tokens, whitespace, fences, wrappers and orphan closers, a
//!   thinking or analysis part before the call, words that are markup;
//!   words after the call make the text prose ([`super::words`]). Two calls
//!   or more are [`Reading::Many`], never one of them.
//!
//! By concern:
//!
//! - [`tokens`]: the text tokenised once (a tag's head is at most
//!   [`tokens::MAX_HEAD`] bytes, so no `<` searches far);
//! - [`anchor`]: the caller's tools as the reading asks of them, and a
//!   call being read against one ([`anchor::Frame`]);
//! - [`reader`]: one pass over the tokens, finding the calls and what is
//!   around them;
//! - [`text`]: a call written in text, by principle: a tool's name (after
//!   a label that is a name key), any separator, any body; a JSON object
//!   naming a tool under a name key or as its only key.
//!
//! Repeated children of one parameter are its items where the schema
//! admits an array ([`anchor::Frame::set`]); attributes beside a call's
//! name are arguments (`arguments='{…}'` its object), never dropped.
//! Linear: every byte visited is charged to the meter.

mod anchor;
mod reader;
mod text;
mod tokens;

pub(crate) use anchor::{Anchor, Tool};

use super::{Found, Reading};
use crate::exec::{limits::ArgumentLimits, prepare::work};
use reader::{after_thought, Reader};
use tokens::tokens;

/// The calls `text` holds, read by structure and anchored by `anchor`.
pub(crate) fn read(text: &str, anchor: &dyn Anchor, limits: ArgumentLimits) -> Reading {
    if work::spent() {
        return Reading::Nothing;
    }
    let tokens = tokens(text);
    // A thought before the call: the families read what follows it.
    if let Some(rest) = after_thought(text, &tokens) {
        let reading = super::read(rest, limits);
        if reading != Reading::Nothing {
            return reading;
        }
    }
    let mut reader = Reader::new(text, anchor, limits);
    reader.read(&tokens);
    reader.reading()
}

/// Every call of `text`, in order, when it is nothing but calls and
/// residue and each call has its one reading (a thought first, wrappers,
/// closers, whitespace between); `None` otherwise, and for no call. For
/// text that may hold several calls (the model door's `content`): each
/// is then prepared as a call of its own.
pub(crate) fn read_each(text: &str, anchor: &dyn Anchor, limits: ArgumentLimits) -> Option<Vec<Found>> {
    if work::spent() {
        return None;
    }
    let tokens = tokens(text);
    let mut reader = Reader::new(text, anchor, limits);
    reader.read(&tokens);
    reader.each()
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, Value};

    use super::{super::Arguments, *};
    use crate::similar::normalised_key;

    /// The caller's tools of the tests: `get_weather(city, unit, days,
    /// cities)` (city required, cities an array) and `read_file(path)`
    /// (required).
    struct Tools {
        weather: Vec<String>,
        file: Vec<String>,
        city: Vec<String>,
        path: Vec<String>,
        cities: Vec<String>,
    }

    impl Tools {
        fn new() -> Self {
            let owned = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
            Tools {
                weather: owned(&["city", "unit", "days", "cities"]),
                file: owned(&["path"]),
                city: owned(&["city"]),
                path: owned(&["path"]),
                cities: owned(&["cities"]),
            }
        }
    }

    impl Anchor for Tools {
        fn tool(&self, name: &str) -> Option<Tool<'_>> {
            let name = name.rsplit(['.', ':']).next().unwrap_or(name);
            match normalised_key(name).as_str() {
                "getweather" => Some(Tool { parameters: &self.weather, required: &self.city, lists: &self.cities }),
                "readfile" => Some(Tool { parameters: &self.file, required: &self.path, lists: &[] }),
                "now" => Some(Tool { parameters: &[], required: &[], lists: &[] }),
                _ => None,
            }
        }
    }

    fn reading(text: &str) -> Reading {
        read(text, &Tools::new(), ArgumentLimits::default())
    }

    /// The one call read: its name as written and its arguments as JSON.
    fn one(text: &str) -> (String, Value) {
        match reading(text) {
            Reading::One(Found { name: Some(name), arguments }) => {
                let arguments = match arguments {
                    Arguments::Values(values) | Arguments::Markup(values) => Value::Object(values),
                    Arguments::Text(text) => serde_json::from_str(&text).unwrap(),
                    Arguments::Absent | Arguments::Unwritten => Value::Object(Map::new()),
                };
                (name, arguments)
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }

    #[test]
    fn new_templates_are_read_by_structure() {
        let paris = serde_json::json!({"city": "Paris"});
        for text in [
            // DeepSeek's DSML.
            "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
            "<｜DSML｜invoke name=\"get_weather\">{\"city\": \"Paris\"}</｜DSML｜invoke>",
            // Calls as XML elements, and self-closing.
            "<get_weather><city>Paris</city></get_weather>",
            "<get_weather city=\"Paris\"/>",
            // Qwen3-Coder with its opener missing, its last parameter left
            // open, a closer fused to the next, an orphan closer.
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter</function>\n</tool_call>",
            "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</function>\n</tool_call>",
            // Tags that lost their `<` (MiniMax).
            "<minimax:tool_call>\ninvoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n</invoke>\n</minimax:tool_call>",
            // Gemma 4's bare keys.
            "call:get_weather{city: \"Paris\"}",
            "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>",
            // A thought before the call.
            "The user wants the weather.</think>\n<get_weather><city>Paris</city></get_weather>",
            "<think>weather</think><function=get_weather><parameter=city>Paris</parameter></function>",
            // A name as text, then its parameters.
            "get_weather\n<parameter=city>Paris</parameter>",
            // Residue after the call: closers, tokens, a fence.
            "get_weather(city=\"Paris\")\n</tool_call><|im_end|>",
            "call:get_weather{city: \"Paris\"}\n```",
        ] {
            let (_, arguments) = one(text);
            // Values as written: their layout is the markup stage's to read.
            let city = arguments["city"].as_str().unwrap_or_else(|| panic!("{text}: {arguments}"));
            assert_eq!(city.trim(), "Paris", "{text}");
            assert_eq!(arguments.as_object().unwrap().len(), 1, "{text}");
        }
        let _ = paris;
    }

    /// The words rule: after the last call only residue; words (a sentence,
    /// a full stop, an emoji) make the whole text prose, whatever the call
    /// was written in.
    #[test]
    fn words_after_a_call_make_the_text_prose() {
        for text in [
            "get_weather(city=\"Paris\")\nI will tell you once I know.",
            "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\nI will tell you once I know.",
            "get_weather(city=\"Paris\") -- never run this.",
            "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call> is what I refuse.",
            "<get_weather><city>Paris</city></get_weather>.",
            "call:get_weather{city: \"Paris\"} \u{1F642}",
            "<tool_call>now</tool_call>, then",
        ] {
            assert!(matches!(reading(text), Reading::Words(_)), "{text}: {:?}", reading(text));
        }
        // Between calls, `,` and `;` separate them.
        assert_eq!(reading("call:get_weather{city: \"Paris\"}, call:get_weather{city: \"Rome\"}"), Reading::Many(2));
        assert_eq!(reading("get_weather(city='Paris'); get_weather(city='Rome')"), Reading::Many(2));
    }

    /// Text shaped against the reading, at 1 MiB, costs a few passes: the
    /// bytes it visits stay within a small multiple of its length.
    #[test]
    fn hostile_shapes_are_read_in_linear_work() {
        let size = 1 << 20;
        for unit in [
            "<a>",
            "<get_weather>",
            "<get_weather><city>",
            "<invoke name=\"get_weather\"><parameter name=\"city\">",
            "call:get_weather{",
            "get_weather{city: ",
            "\ninvoke name=\"get_weather\">",
            "<|\"|>",
            "</think>",
            "<think>",
            "<a ",
            "get_weather(",
            "<get_weather city=\"a\"/>",
            "<function=",
            "<",
            "a <",
            "</parameter",
            // Names then bodies, labels, separators.
            "get_weather city=a ",
            "get_weather - ",
            "Tool: get_weather\n",
            "get_weather((",
            "get_weather(city: ",
            "{\"get_weather\": ",
            // Characters of several bytes wherever a window may end.
            "<｜DSML｜invoke name=\"get_weather\">",
            "<a ｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜｜",
        ] {
            let text = unit.repeat(size / unit.len());
            let (_, work) = work::metered(text.len(), || reading(&text));
            assert!(!work.exhausted && work.spent <= 16 * size as u64, "{unit:?}: {work:?}");
        }
    }

    /// A name alone inside a wrapper is a call without arguments; a tool
    /// that requires some is then incomplete.
    #[test]
    fn a_wrapped_name_is_a_call_without_arguments() {
        for text in ["<tool_call>now</tool_call>", "  \n<tool_call>now\n</tool_call>", "<call>now</call>"] {
            assert_eq!(one(text), ("now".to_owned(), serde_json::json!({})), "{text}");
        }
        assert_eq!(reading("<tool_call>get_weather</tool_call>"), Reading::Nothing);
        assert_eq!(reading("<tool_call>now later</tool_call>"), Reading::Nothing);
        assert!(matches!(reading("Checking.<tool_call>now</tool_call>"), Reading::AfterProse(_)));
        assert_eq!(reading("<tool_call>now</tool_call><tool_call>now</tool_call>"), Reading::Many(2));
    }

    #[test]
    fn what_is_not_one_complete_call_is_no_reading() {
        for text in [
            // A required parameter missing; a key of no parameter; a key twice.
            "<get_weather><unit>celsius</unit></get_weather>",
            "<get_weather><town>Paris</town></get_weather>",
            "<get_weather><city>Paris</city><city>Rome</city></get_weather>",
            // Not a tool of the caller's.
            "<delete_file><path>/etc</path></delete_file>",
            // A call never closed, its value ended by a wrapper's closer:
            // where the value ends is a guess.
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</tool_call>",
            // A wrapper left open at the end: cut off, or its closer left out.
            "<tool_call>get_weather\n<parameter=city>Paris</parameter>",
            // Markup that does not match its opener.
            "<｜DSML｜invoke name=\"get_weather\"><parameter name=\"city\">Paris</｜DSML｜parameter></｜DSML｜invoke>",
        ] {
            assert_eq!(reading(text), Reading::Nothing, "{text}");
        }
        // Words before one call: two readings (the words, or the call); in
        // the words' own text, no reading.
        let text = "I would call <get_weather><city>Paris</city></get_weather>";
        assert!(matches!(reading(text), Reading::AfterProse(_)), "{text}: {:?}", reading(text));
        assert_eq!(reading("Sure! call:get_weather{city: \"Paris\"}"), Reading::Nothing);
        // Two calls, in any shape: never one of them.
        for text in [
            "<get_weather><city>Paris</city></get_weather><get_weather><city>Rome</city></get_weather>",
            "<get_weather city=\"Paris\"/>\n<read_file path=\"/a\"/>",
            "call:get_weather{city: \"Paris\"} call:read_file{path: \"/a\"}",
            "<get_weather><city>Paris</city></get_weather>\nread_file(path='/a')",
        ] {
            assert!(matches!(reading(text), Reading::Many(2)), "{text}: {:?}", reading(text));
        }
    }
}
