//! Policy over arguments (`principals[].when`, docs/security.md): a
//! principal's grants say which tools it may run; its conditions say with
//! which arguments. Each entry maps a tool, alias or toolset name (or `"*"`)
//! to a CEL expression and the message a denied call gets; every entry
//! covering a tool must hold for a call of it to run.
//!
//! An expression sees `args` (the arguments after repair, validation and
//! `bind`: what the tool would receive), `user` (`issuer`, `subject` and
//! `claims` of the verified end-user token; `null` without one),
//! `principal` (its name) and `tool` (the canonical name). It must be
//! `true`: `false`, any other value, or an error (a missing field, a type
//! that does not compare) denies.

use std::{
    collections::HashMap,
    sync::{Arc, LazyLock},
};

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{grants::is_every_tool, User};

/// CEL's standard functions, made once (making them for each call would
/// cost more than the evaluation).
static ENVIRONMENT: LazyLock<Arc<cel::Env>> = LazyLock::new(|| Arc::new(cel::Env::stdlib()));

/// One `when` entry as configured.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WhenConfig {
    /// The CEL expression that must be true.
    #[serde(rename = "if")]
    pub(crate) condition: String,
    /// What the model is told when it is not.
    pub(crate) message: String,
}

/// One compiled `when` entry.
pub(crate) struct Condition {
    /// The tool, alias or toolset name it covers, or `"*"`.
    pub(crate) covers: String,
    program: cel::Program,
    message: String,
}

impl std::fmt::Debug for Condition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Condition").field("covers", &self.covers).field("message", &self.message).finish()
    }
}

impl Condition {
    /// Compiles one entry; the error says why it does not compile.
    pub(crate) fn compile(covers: &str, config: &WhenConfig) -> Result<Self, String> {
        if config.message.trim().is_empty() {
            return Err("a condition needs a message: what the model is told when it is false".to_owned());
        }
        let program = cel::Program::compile(&config.condition).map_err(|errors| {
            let errors = errors.to_string();
            format!("the condition '{}' is not valid CEL: {}", config.condition, errors.trim())
        })?;
        Ok(Self { covers: covers.to_owned(), program, message: config.message.clone() })
    }

    /// Whether this entry covers every tool.
    pub(crate) fn covers_every_tool(&self) -> bool {
        is_every_tool(&self.covers)
    }

    /// `Ok` when the condition is true of the call `context` holds
    /// ([`Facts::context`]); else the message.
    pub(crate) fn check(&self, context: &cel::Context<'_, '_>) -> Result<(), &str> {
        match self.program.execute(context) {
            Ok(cel::Value::Bool(true)) => Ok(()),
            _ => Err(&self.message),
        }
    }
}

/// What a condition is evaluated over: one call.
pub(crate) struct Facts<'a> {
    pub(crate) args: &'a Map<String, Value>,
    pub(crate) user: Option<&'a User>,
    pub(crate) principal: Option<&'a str>,
    pub(crate) tool: &'a str,
}

impl Facts<'_> {
    /// The call as CEL sees it, made once for all its conditions.
    pub(crate) fn context(&self) -> cel::Context<'static, 'static> {
        let mut context = cel::Context::with_env(Arc::clone(&ENVIRONMENT));
        context.add_variable_from_value("args", object(self.args));
        context.add_variable_from_value("user", self.user.map_or(cel::Value::Null, user));
        context.add_variable_from_value("principal", self.principal.map_or(cel::Value::Null, string));
        context.add_variable_from_value("tool", string(self.tool));
        context
    }
}

/// Every entry of one principal's `when:`, compiled in order; each
/// problem as `KEY: why`.
pub(crate) fn compile_all(when: &Map<String, Value>) -> (Vec<Condition>, Vec<String>) {
    let (mut conditions, mut problems) = (Vec::new(), Vec::new());
    for (covers, entry) in when {
        let compiled = WhenConfig::deserialize(entry)
            .map_err(|err| format!("expected {{if: CEL expression, message: text}}: {err}"))
            .and_then(|config| Condition::compile(covers, &config));
        match compiled {
            Ok(condition) => conditions.push(condition),
            Err(why) => problems.push(format!("{covers}: {why}")),
        }
    }
    (conditions, problems)
}

fn string(text: &str) -> cel::Value {
    cel::Value::String(Arc::new(text.to_owned()))
}

/// A JSON value as CEL sees it: an integer that fits is an `int`.
fn value(json: &Value) -> cel::Value {
    match json {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => cel::Value::Int(i),
            (None, Some(u)) => cel::Value::UInt(u),
            _ => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => string(s),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(value).collect())),
        Value::Object(fields) => object(fields),
    }
}

fn object(fields: &Map<String, Value>) -> cel::Value {
    let map: HashMap<String, cel::Value> = fields.iter().map(|(k, v)| (k.clone(), value(v))).collect();
    cel::Value::Map(map.into())
}

/// `user`: the issuer, the subject and the token's claims (its payload,
/// verified when the call was authenticated).
fn user(user: &User) -> cel::Value {
    let mut fields = HashMap::new();
    fields.insert("issuer".to_owned(), string(&user.issuer));
    fields.insert("subject".to_owned(), string(&user.id));
    fields.insert("claims".to_owned(), object(&user.claims));
    cel::Value::Map(fields.into())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn condition(text: &str) -> Condition {
        Condition::compile("refund_payment", &WhenConfig { condition: text.into(), message: "no".into() }).unwrap()
    }

    fn check(condition: &Condition, args: Value) -> bool {
        let args = args.as_object().unwrap().clone();
        let facts = Facts { args: &args, user: None, principal: Some("support"), tool: "refund_payment" };
        condition.check(&facts.context()).is_ok()
    }

    #[test]
    fn conditions_hold_or_deny() {
        let small = condition("args.amount <= 100");
        assert!(check(&small, json!({"amount": 100})));
        assert!(!check(&small, json!({"amount": 101})));
        assert!(check(&small, json!({"amount": 99.5})));
        assert!(!check(&small, json!({})), "a missing field denies");
        assert!(!check(&small, json!({"amount": "50"})), "a type that does not compare denies");
        let path = condition("args.path.startsWith('/srv/') && principal == 'support' && tool == 'refund_payment'");
        assert!(check(&path, json!({"path": "/srv/a"})));
        assert!(!check(&path, json!({"path": "/etc/passwd"})));
        assert!(!check(&condition("args.amount"), json!({"amount": 1})), "not a bool: denies");
        assert!(check(&condition("user == null"), json!({})));
    }

    #[test]
    fn bad_entries_say_where_and_why() {
        let when = json!({
            "refund_payment": {"if": "args.amount <=", "message": "no"},
            "read_file": {"if": "true"},
            "*": {"if": "true", "message": "fine"},
        });
        let (conditions, problems) = compile_all(when.as_object().unwrap());
        assert_eq!(conditions.len(), 1);
        assert!(conditions[0].covers_every_tool());
        assert!(
            problems[0].starts_with("refund_payment: the condition 'args.amount <=' is not valid CEL"),
            "{problems:?}"
        );
        assert!(problems[1].starts_with("read_file: expected {if: CEL expression, message: text}"), "{problems:?}");
    }
}
