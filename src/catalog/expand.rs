//! `${VAR}` in backend settings, read from the environment at load. A
//! missing variable is an error naming it; values (often secrets) are never
//! put in a message.

use crate::env::Env;

/// Expands every `${NAME}` in `text` from `env`. `$${` writes a literal `${`.
/// A missing variable is an error naming it; values are never put in messages.
pub(crate) fn expand(text: &str, env: &Env) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut missing = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
        } else if let Some(after) = tail.strip_prefix("${") {
            let Some(end) = after.find('}') else {
                return Err("unterminated '${' (write '$${' for a literal '${')".to_owned());
            };
            let name = &after[..end];
            let valid = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !valid {
                return Err(format!("invalid variable name '${{{name}}}'"));
            }
            match env.get(name) {
                Some(value) => out.push_str(value),
                None => missing.push(name),
            }
            rest = &after[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    match missing.as_slice() {
        [] => Ok(out),
        [one] => Err(format!("environment variable '{one}' is not set")),
        many => Err(format!("environment variables {} are not set", quoted_list(many))),
    }
}

fn quoted_list(names: &[&str]) -> String {
    names.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Env {
        Env::from_pairs([("TOKEN", "s3cret"), ("HOST", "127.0.0.1")])
    }

    #[test]
    fn expands_variables() {
        assert_eq!(expand("Bearer ${TOKEN}", &env()).unwrap(), "Bearer s3cret");
        assert_eq!(expand("http://${HOST}:8080/${TOKEN}", &env()).unwrap(), "http://127.0.0.1:8080/s3cret");
        assert_eq!(expand("no variables, $5", &env()).unwrap(), "no variables, $5");
        assert_eq!(expand("literal $${TOKEN}", &env()).unwrap(), "literal ${TOKEN}");
    }

    #[test]
    fn missing_variables_are_named_and_values_never_shown() {
        assert_eq!(expand("${NOPE}", &env()).unwrap_err(), "environment variable 'NOPE' is not set");
        let err = expand("${A} ${TOKEN} ${B}", &env()).unwrap_err();
        assert_eq!(err, "environment variables 'A', 'B' are not set");
        assert!(!err.contains("s3cret"));
        assert!(expand("${TOKEN", &env()).unwrap_err().contains("unterminated"));
        assert!(expand("${1X}", &env()).unwrap_err().contains("invalid variable name"));
    }
}
