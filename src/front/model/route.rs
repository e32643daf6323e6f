//! Which upstream serves a request: the first whose `models` globs match
//! the request's `model` (an upstream without `models` serves every
//! model), else `default_upstream`.

use crate::config::{ModelSettings, Upstream};

/// The upstream for `model`, if any.
pub(super) fn upstream<'s>(settings: &'s ModelSettings, model: &str) -> Option<&'s Upstream> {
    let matching =
        settings.upstreams.iter().find(|u| u.models.is_empty() || u.models.iter().any(|glob| matches(glob, model)));
    matching.or_else(|| settings.default_upstream.map(|at| &settings.upstreams[at]))
}

/// Whether `text` matches `glob`: `*` any run of characters, `?` one,
/// anything else itself. Linear in practice: the usual two-pointer walk
/// that backtracks only to the last `*`.
pub(super) fn matches(glob: &str, text: &str) -> bool {
    let (glob, text): (Vec<char>, Vec<char>) = (glob.chars().collect(), text.chars().collect());
    let (mut g, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match glob.get(g) {
            Some('*') => {
                star = Some((g, t));
                g += 1;
            }
            Some(&c) if c == '?' || c == text[t] => {
                g += 1;
                t += 1;
            }
            _ => match star {
                Some((sg, st)) => {
                    g = sg + 1;
                    t = st + 1;
                    star = Some((sg, st + 1));
                }
                None => return false,
            },
        }
    }
    glob[g..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        for (glob, text) in
            [("gpt-oss-*", "gpt-oss-20b"), ("*", ""), ("qwen3-coder", "qwen3-coder"), ("q?en*", "qwen3")]
        {
            assert!(matches(glob, text), "{glob} {text}");
        }
        for (glob, text) in [("gpt-oss-*", "gpt-4o"), ("qwen3-coder", "qwen3-coder-30b"), ("a?c", "ac")] {
            assert!(!matches(glob, text), "{glob} {text}");
        }
    }
}
