//! Argument names a model drifted from the schema's (`Query` for `query`,
//! `max-results` for `max_results`): renamed when exactly one declared
//! parameter that was not given has the same normalised key (lower-cased,
//! separators dropped). Keys that read as a parameter without being it, in
//! any folding, are the validation stage's to refuse.

use serde_json::{Map, Value};

use crate::{
    catalog::Schema,
    exec::outcome::{Repair, RepairKind},
    similar::normalised_key,
};

/// Renames each unexpected argument whose normalised key matches exactly one
/// declared parameter that was not given (`Query` → `query`, `max-results` →
/// `max_results`; not `ſku`, whose `ſ` lower-cases to itself). The argument
/// keeps its place.
pub(crate) fn repair_names(object: &mut Map<String, Value>, schema: &Schema) -> Vec<Repair> {
    let declared = schema.parameters();
    if object.keys().all(|k| declared.iter().any(|d| d == k)) {
        return Vec::new();
    }
    // Only a declared parameter the call left out can be what a key meant:
    // with none (every one given, or a schema declaring none, as tools
    // taking any object do) there is nothing to repair to, and no key is
    // folded.
    let left_out: Vec<(&String, String)> =
        declared.iter().filter(|d| !object.contains_key(d.as_str())).map(|d| (d, normalised_key(d))).collect();
    if left_out.is_empty() {
        return Vec::new();
    }
    let mut repairs = Vec::new();
    let mut renamed: Vec<(String, String)> = Vec::new();
    for key in object.keys() {
        if declared.iter().any(|d| d == key) {
            continue;
        }
        let wanted = normalised_key(key);
        let mut matches = left_out
            .iter()
            .filter(|(d, _)| !renamed.iter().any(|(_, to)| to == *d))
            .filter(|(_, folded)| *folded == wanted)
            .map(|(d, _)| *d);
        if let (Some(target), None) = (matches.next(), matches.next()) {
            renamed.push((key.clone(), target.clone()));
        }
    }
    if renamed.is_empty() {
        return repairs;
    }
    let old = std::mem::take(object);
    for (key, value) in old {
        match renamed.iter().find(|(from, _)| *from == key) {
            Some((from, to)) => {
                repairs.push(Repair { kind: RepairKind::ArgumentName, original: from.clone(), repaired: to.clone() });
                object.insert(to.clone(), value);
            }
            None => {
                object.insert(key, value);
            }
        }
    }
    repairs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Map<String, Value> {
        serde_json::from_str(text).unwrap()
    }

    fn schema() -> Schema {
        Schema::compile(serde_json::json!({
            "type": "object",
            "properties": {"query": {"type": "string"}, "max_results": {"type": "integer"}, "Mode": {"type": "string"}},
            "required": ["query"]
        }))
        .unwrap()
    }

    #[test]
    fn drifted_argument_names_are_renamed_in_place() {
        let mut object = parsed(r#"{"Query": "x", "other": 1, "max-results": 5}"#);
        let repairs = repair_names(&mut object, &schema());
        assert_eq!(object.keys().collect::<Vec<_>>(), ["query", "other", "max_results"]);
        let renamed: Vec<(&str, &str)> = repairs.iter().map(|r| (r.original.as_str(), r.repaired.as_str())).collect();
        assert_eq!(renamed, [("Query", "query"), ("max-results", "max_results")]);
        assert!(repairs.iter().all(|r| r.kind == RepairKind::ArgumentName));
    }

    #[test]
    fn a_given_parameter_is_never_overwritten_and_ambiguity_is_left_alone() {
        let mut object = parsed(r#"{"query": "a", "QUERY": "b"}"#);
        assert!(repair_names(&mut object, &schema()).is_empty());
        assert_eq!(object["query"], "a");
        // Two drifted names for one parameter: only the first is renamed.
        let mut object = parsed(r#"{"Query": "a", "q-u-e-r-y": "b"}"#);
        let repairs = repair_names(&mut object, &schema());
        assert_eq!(repairs.len(), 1);
        assert_eq!(object["query"], "a");
        assert_eq!(object["q-u-e-r-y"], "b");
    }
}
