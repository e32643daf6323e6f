//! Python-style calls: `get_weather(city="Paris", days=3)`, with Python
//! literals (strings in either quotes, also triple-quoted; numbers;
//! `True`/`False`/`None`; lists, tuples and dicts of them), also inside
//! `[…]` (several calls there are [`Reading::Many`]), inside `print(…)`,
//! after a namespace (`default_api.get_weather`, kept for the name stage)
//! or with `.call` (`brave_search.call(query="…")`). Keyword arguments
//! only: a positional argument has no parameter name, so no one reading.

use serde_json::{Map, Number, Value};

use super::{super::work, Arguments, Found, Reading};

/// Nesting of literals at most this deep.
const MAX_DEPTH: usize = 32;

/// The calls `text` is, whole (whitespace aside).
pub(super) fn read(text: &str) -> Option<Reading> {
    let mut parser = Parser { text, at: 0 };
    let mut calls = Vec::new();
    parser.space();
    if parser.eat('[') {
        loop {
            parser.space();
            calls.push(parser.call()?);
            parser.space();
            if parser.eat(',') {
                continue;
            }
            if parser.eat(']') {
                break;
            }
            return None;
        }
    } else {
        calls.push(parser.call()?);
    }
    parser.space();
    if parser.at != text.len() {
        return None;
    }
    Some(match calls.len() {
        1 => Reading::One(calls.pop().expect("one")),
        n => Reading::Many(n),
    })
}

/// A call at the start of `text` (keyword arguments, or none: `name()`),
/// and where it ends (for counting calls in text after a call's
/// arguments); or, when there is none, how far no call can start: past the
/// run of name characters and dots `text` starts with when no `(` follows
/// it (a name starting inside the run ends where it ends), else nowhere
/// (0).
pub(super) fn calls_at(text: &str) -> Result<(usize, usize), usize> {
    let mut parser = Parser { text, at: 0 };
    if let Some(Found { arguments: Arguments::Values(_) | Arguments::Absent, .. }) = parser.call() {
        return Ok((1, parser.at));
    }
    let run = text.find(|c: char| !(is_name_char(c) || c == '.')).unwrap_or(text.len());
    work::charge(run);
    Err(match text[run..].trim_start().starts_with('(') {
        true => 0,
        false => run,
    })
}

/// A character of a Python-style name (and of the `-` models put in them).
fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-'
}

struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Parser<'a> {
    fn rest(&self) -> &'a str {
        &self.text[self.at..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn eat(&mut self, c: char) -> bool {
        match self.peek() == Some(c) {
            true => {
                self.at += c.len_utf8();
                true
            }
            false => false,
        }
    }

    fn space(&mut self) {
        let trimmed = self.rest().trim_start();
        work::charge(self.rest().len() - trimmed.len());
        self.at = self.text.len() - trimmed.len();
    }

    fn identifier(&mut self) -> Option<&'a str> {
        let rest = self.rest();
        let len = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len());
        if !work::charge(len + 1) {
            return None;
        }
        if len == 0 || rest.starts_with(|c: char| c.is_ascii_digit() || c == '-') {
            return None;
        }
        let start = self.at;
        self.at += len;
        Some(&self.text[start..start + len])
    }

    /// `name`, `ns.name`, `name.call`: a name and its dots.
    fn dotted_name(&mut self) -> Option<&'a str> {
        let start = self.at;
        self.identifier()?;
        while self.peek() == Some('.') {
            self.at += 1;
            self.identifier()?;
        }
        Some(&self.text[start..self.at])
    }

    /// `name(…)`, `ns.name(…)`, `name.call(…)`, `print(call)`.
    fn call(&mut self) -> Option<Found> {
        if work::spent() {
            return None;
        }
        let dotted = self.dotted_name()?;
        self.space();
        if !self.eat('(') {
            return None;
        }
        self.space();
        if dotted == "print" {
            let inner = self.call()?;
            self.space();
            return self.eat(')').then_some(inner);
        }
        let name = dotted.strip_suffix(".call").unwrap_or(dotted).to_owned();
        let mut values = Map::new();
        loop {
            self.space();
            if self.eat(')') {
                break;
            }
            let key = self.identifier()?.to_owned();
            self.space();
            if !self.eat('=') || self.peek() == Some('=') {
                return None;
            }
            self.space();
            let value = self.literal(0)?;
            if values.insert(key, value).is_some() {
                return None;
            }
            self.space();
            if !self.eat(',') {
                self.space();
                if !self.eat(')') {
                    return None;
                }
                break;
            }
        }
        let arguments = match values.is_empty() {
            true => Arguments::Absent,
            false => Arguments::Values(values),
        };
        Some(Found { name: Some(name), arguments })
    }

    fn literal(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH || !work::charge(1) {
            return None;
        }
        match self.peek()? {
            '"' | '\'' => self.string().map(Value::String),
            '[' | '(' => {
                let close = if self.eat('[') {
                    ']'
                } else {
                    self.at += 1;
                    ')'
                };
                let mut items = Vec::new();
                loop {
                    self.space();
                    if self.eat(close) {
                        return Some(Value::Array(items));
                    }
                    items.push(self.literal(depth + 1)?);
                    self.space();
                    if !self.eat(',') {
                        self.space();
                        return self.eat(close).then_some(Value::Array(items));
                    }
                }
            }
            '{' => {
                self.at += 1;
                let mut object = Map::new();
                loop {
                    self.space();
                    if self.eat('}') {
                        return Some(Value::Object(object));
                    }
                    let Value::String(key) = self.literal(depth + 1)? else { return None };
                    self.space();
                    if !self.eat(':') {
                        return None;
                    }
                    self.space();
                    let value = self.literal(depth + 1)?;
                    if object.insert(key, value).is_some() {
                        return None;
                    }
                    self.space();
                    if !self.eat(',') {
                        self.space();
                        return self.eat('}').then_some(Value::Object(object));
                    }
                }
            }
            c if c.is_ascii_digit() || c == '-' || c == '+' || c == '.' => self.number(),
            _ => match self.identifier()? {
                "True" | "true" => Some(Value::Bool(true)),
                "False" | "false" => Some(Value::Bool(false)),
                "None" | "null" => Some(Value::Null),
                _ => None,
            },
        }
    }

    fn number(&mut self) -> Option<Value> {
        let rest = self.rest();
        let len = rest
            .char_indices()
            .find(|&(i, c)| {
                !(c.is_ascii_digit()
                    || c == '.'
                    || c == 'e'
                    || c == 'E'
                    || ((c == '-' || c == '+') && (i == 0 || rest[..i].ends_with(['e', 'E']))))
            })
            .map_or(rest.len(), |(i, _)| i);
        work::charge(len);
        let text = rest[..len].trim_start_matches('+');
        self.at += len;
        if let Ok(int) = text.parse::<i64>() {
            return Some(Value::from(int));
        }
        if let Ok(int) = text.parse::<u64>() {
            return Some(Value::from(int));
        }
        let float: f64 = text.parse().ok()?;
        Number::from_f64(float).map(Value::Number)
    }

    /// A string in `'` or `"`, or tripled, without escapes.
    fn string(&mut self) -> Option<String> {
        let rest = self.rest();
        let quote = rest.chars().next()?;
        let triple: String = std::iter::repeat_n(quote, 3).collect();
        let (delimiter, mut at) = match rest.starts_with(&triple) {
            true => (triple.as_str(), 3),
            false => (&rest[..1], 1),
        };
        let mut out = String::new();
        loop {
            if !work::charge(1) {
                return None;
            }
            let tail = &rest[at..];
            if tail.starts_with(delimiter) {
                self.at += at + delimiter.len();
                return Some(out);
            }
            let c = tail.chars().next()?;
            if c == '\n' && delimiter.len() == 1 {
                return None;
            }
            // An escape reads two ways: as Python reads it, or as written
            // (the peers' parsers differ): no one reading.
            if c == '\\' {
                return None;
            }
            out.push(c);
            at += c.len_utf8();
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn one(text: &str) -> (String, Value) {
        match read(text) {
            Some(Reading::One(Found { name: Some(name), arguments })) => {
                let value = match arguments {
                    Arguments::Values(values) => Value::Object(values),
                    _ => json!({}),
                };
                (name, value)
            }
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn calls_with_python_literals() {
        let expected =
            json!({"city": "Paris", "days": 3, "metric": true, "tags": ["a", "b"], "extra": null, "o": {"k": 1.5}});
        let text = r#"get_weather(city='Paris', days=3, metric=True, tags=["a", 'b'], extra=None, o={'k': 1.5})"#;
        assert_eq!(one(text), ("get_weather".to_owned(), expected.clone()));
        assert_eq!(one(&format!("[{text}]")).1, expected);
        assert_eq!(one(&format!("print({text})")).1, expected);
        assert_eq!(one("default_api.get_weather(city=\"Paris\")").0, "default_api.get_weather");
        assert_eq!(one("brave_search.call(query=\"x\")"), ("brave_search".to_owned(), json!({"query": "x"})));
        assert_eq!(one("get_weather()"), ("get_weather".to_owned(), json!({})));
        assert_eq!(
            one("f(text='''a\n'b'\n''', n=-2, t=(1, 2), e=\"it's\")").1,
            json!({"text": "a\n'b'\n", "n": -2, "t": [1, 2], "e": "it's"})
        );
    }

    #[test]
    fn what_is_not_one_reading() {
        assert_eq!(read("[a(x=1), b(y=2)]"), Some(Reading::Many(2)));
        for text in [
            "get_weather('Paris')",
            "get_weather(city=Paris)",
            "get_weather(city='Paris', city='Rome')",
            "get_weather(city='Paris'",
            "get_weather(city='Paris') and more",
            "get_weather(city=='Paris')",
            // An escape: as Python reads it, or as written.
            "write_file(content='line1\\nline2')",
            "bash(command='echo \\'hi\\'')",
            "Let me check (the weather)",
        ] {
            assert!(!matches!(read(text), Some(Reading::One(_))), "{text}");
        }
    }
}
