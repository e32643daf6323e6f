//! `calculator`: a safe arithmetic evaluator over f64.
//!
//! Numbers (`2`, `4.5`, `1e3`), `+ - * / %`, powers (`^` or `**`, right
//! associative, above unary minus: `-2^2` is -4), parentheses. Nothing else:
//! no names, no functions, no assignment, so no expression can do more than
//! compute. General expression crates evaluate whole languages (strings,
//! booleans, variables, integer division where 7/2 is 3); an arithmetic tool
//! for models wants none of that, hence this small parser.

use serde_json::{json, Value};

/// Deeper nesting than this is refused rather than recursed into.
const MAX_DEPTH: usize = 64;

/// Evaluates `expression`; the error is the tool's own, worded for the model.
pub(crate) fn evaluate(expression: &str) -> Result<Value, String> {
    let mut parser = Parser { chars: expression.chars().collect(), at: 0, depth: 0 };
    let value = parser.expression()?;
    parser.skip_spaces();
    if let Some(c) = parser.peek() {
        return Err(format!("unexpected '{c}' at position {} of the expression", parser.at + 1));
    }
    if !value.is_finite() {
        return Err("the result is too large to represent".to_owned());
    }
    Ok(json!({"expression": expression, "result": number(value)}))
}

/// Whole results as integers (`20`, not `20.0`) while exact.
fn number(value: f64) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if value.fract() == 0.0 && value.abs() <= EXACT {
        json!(value as i64)
    } else {
        json!(value)
    }
}

struct Parser {
    chars: Vec<char>,
    at: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn skip_spaces(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.at += 1;
        }
    }

    /// The next operator, if it is one of `ops` (`**` reads as `^`).
    fn operator(&mut self, ops: &[char]) -> Option<char> {
        self.skip_spaces();
        let c = self.peek()?;
        if c == '*' && self.chars.get(self.at + 1) == Some(&'*') {
            if ops.contains(&'^') {
                self.at += 2;
                return Some('^');
            }
            return None;
        }
        if ops.contains(&c) {
            self.at += 1;
            return Some(c);
        }
        None
    }

    fn enter(&mut self) -> Result<(), String> {
        self.depth += 1;
        match self.depth > MAX_DEPTH {
            true => Err(format!("the expression is nested deeper than {MAX_DEPTH} levels")),
            false => Ok(()),
        }
    }

    fn expression(&mut self) -> Result<f64, String> {
        let mut value = self.term()?;
        while let Some(op) = self.operator(&['+', '-']) {
            let right = self.term()?;
            value = if op == '+' { value + right } else { value - right };
        }
        Ok(value)
    }

    fn term(&mut self) -> Result<f64, String> {
        let mut value = self.unary()?;
        while let Some(op) = self.operator(&['*', '/', '%']) {
            let right = self.unary()?;
            value = match op {
                '*' => value * right,
                _ if right == 0.0 => return Err("division by zero".to_owned()),
                '/' => value / right,
                _ => value % right,
            };
        }
        Ok(value)
    }

    fn unary(&mut self) -> Result<f64, String> {
        self.skip_spaces();
        match self.peek() {
            Some(sign @ ('-' | '+')) => {
                self.at += 1;
                self.enter()?;
                let value = self.unary()?;
                self.depth -= 1;
                Ok(if sign == '-' { -value } else { value })
            }
            _ => self.power(),
        }
    }

    fn power(&mut self) -> Result<f64, String> {
        let base = self.primary()?;
        if self.operator(&['^']).is_some() {
            self.enter()?;
            let exponent = self.unary()?;
            self.depth -= 1;
            return Ok(base.powf(exponent));
        }
        Ok(base)
    }

    fn primary(&mut self) -> Result<f64, String> {
        self.skip_spaces();
        match self.peek() {
            Some('(') => {
                self.at += 1;
                self.enter()?;
                let value = self.expression()?;
                self.depth -= 1;
                self.skip_spaces();
                if self.peek() != Some(')') {
                    return Err(format!("missing ')' at position {} of the expression", self.at + 1));
                }
                self.at += 1;
                Ok(value)
            }
            Some(c) if c.is_ascii_digit() || c == '.' => self.number(),
            Some(c) => Err(format!("unexpected '{c}' at position {} of the expression", self.at + 1)),
            None => Err("the expression ends where a number was expected".to_owned()),
        }
    }

    fn number(&mut self) -> Result<f64, String> {
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_digit() || c == '.') {
            self.at += 1;
        }
        if matches!(self.peek(), Some('e' | 'E')) {
            let mark = self.at;
            self.at += 1;
            if matches!(self.peek(), Some('+' | '-')) {
                self.at += 1;
            }
            if self.peek().is_some_and(|c| c.is_ascii_digit()) {
                while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    self.at += 1;
                }
            } else {
                self.at = mark;
            }
        }
        let text: String = self.chars[start..self.at].iter().collect();
        text.parse().map_err(|_| format!("'{text}' is not a number"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(expression: &str) -> Value {
        evaluate(expression).unwrap_or_else(|e| panic!("{expression}: {e}"))["result"].clone()
    }

    #[test]
    fn arithmetic() {
        assert_eq!(result("(2 + 3) * 4.5"), json!(22.5));
        assert_eq!(result("7 / 2"), json!(3.5));
        assert_eq!(result("2 + 3 * 4"), json!(14));
        assert_eq!(result("2 ^ 3 ^ 2"), json!(512));
        assert_eq!(result("2 ** 10"), json!(1024));
        assert_eq!(result("-2 ^ 2"), json!(-4));
        assert_eq!(result("10 % 4"), json!(2));
        assert_eq!(result("1e3 + .5"), json!(1000.5));
        assert_eq!(result(" - ( - 3 ) "), json!(3));
        assert_eq!(result("0.1 + 0.2"), json!(0.30000000000000004));
    }

    #[test]
    fn the_tool_says_what_is_wrong() {
        assert_eq!(evaluate("1 / 0").unwrap_err(), "division by zero");
        assert_eq!(evaluate("5 % (2 - 2)").unwrap_err(), "division by zero");
        assert_eq!(evaluate("2 +").unwrap_err(), "the expression ends where a number was expected");
        assert_eq!(evaluate("2 + x").unwrap_err(), "unexpected 'x' at position 5 of the expression");
        assert_eq!(evaluate("(1 + 2").unwrap_err(), "missing ')' at position 7 of the expression");
        assert_eq!(evaluate("1 2").unwrap_err(), "unexpected '2' at position 3 of the expression");
        assert_eq!(evaluate("1.2.3").unwrap_err(), "'1.2.3' is not a number");
        assert_eq!(evaluate("10 ^ 400").unwrap_err(), "the result is too large to represent");
        assert!(evaluate("__import__('os')").is_err());
    }

    #[test]
    fn deep_nesting_is_refused_not_recursed() {
        let deep = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
        assert_eq!(evaluate(&deep).unwrap_err(), "the expression is nested deeper than 64 levels");
        assert_eq!(evaluate(&"-".repeat(10_000)).unwrap_err(), "the expression is nested deeper than 64 levels");
    }
}
