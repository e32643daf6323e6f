//! Pure string functions for names: normalisation (the key a drifted name is
//! compared by), similarity on difflib's scale, the suggestion index built at
//! load, the words of a name wrapped in template residue, and the one "did
//! you mean" sentence of operator-facing messages.
//!
//! A leaf: it knows nothing of the catalogue, requests or the network; the
//! catalogue, resolution and the executor all use it.

mod index;
mod normalise;
pub(crate) mod residue;

pub use index::SuggestIndex;
pub use index::{similarity, Suggestion};
pub(crate) use normalise::{folded_key_of, has_folded_key, normalised_key};

/// Operator-facing suggestions (catalogue keys, names, packs) need at least
/// this similarity (difflib's `get_close_matches` default).
pub(crate) const NEAR: f64 = 0.6;

/// The nearest of `candidates` to `name` (similarity at least [`NEAR`]),
/// ties to the first in sort order.
pub(crate) fn nearest<'c>(name: &str, candidates: impl IntoIterator<Item = &'c str>) -> Option<&'c str> {
    let mut best: Option<(f64, &str)> = None;
    for candidate in candidates {
        let score = similarity(name, candidate);
        let better = match best {
            None => true,
            Some((s, b)) => score > s || (score == s && candidate < b),
        };
        if score >= NEAR && better {
            best = Some((score, candidate));
        }
    }
    best.map(|(_, c)| c)
}

/// The one "did you mean" sentence of operator-facing messages:
/// `{statement}, did you mean '{nearest}'?` when a candidate is near `name`,
/// else `{statement}{otherwise}` (`otherwise` may list what exists).
pub(crate) fn did_you_mean<'c>(
    statement: &str,
    name: &str,
    candidates: impl IntoIterator<Item = &'c str>,
    otherwise: impl FnOnce() -> String,
) -> String {
    match nearest(name, candidates) {
        Some(near) => format!("{statement}, did you mean '{near}'?"),
        None => format!("{statement}{}", otherwise()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sentence_with_or_without_a_near_name() {
        let keys = ["description", "parameters"];
        let text = did_you_mean("unknown field 'descripton'", "descripton", keys, String::new);
        assert_eq!(text, "unknown field 'descripton', did you mean 'description'?");
        let text = did_you_mean("unknown field 'zzz'", "zzz", keys, || "; expected one of: a, b".into());
        assert_eq!(text, "unknown field 'zzz'; expected one of: a, b");
    }

    #[test]
    fn ties_go_to_the_name_that_sorts_first() {
        assert_eq!(nearest("xet_user", ["set_user", "get_user"]), Some("get_user"));
        assert_eq!(nearest("banana", ["web_search"]), None);
    }
}
