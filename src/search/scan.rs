//! The ranking a search gets before its snapshot's index is made (the first
//! fraction of a second after start): every tool searched is read as it
//! is, lower-cased, and each time a stem of the query occurs in it counts
//! (in a name twice, in a parameter half). No word splitting, statistics
//! or synonyms: rough, but it never waits for the index.

use super::{Document, Words, NAME_WEIGHT, PARAMETER_WEIGHT, STOP};

/// The `limit` of `documents` (with their positions) that fit `query` best,
/// best first, with their scores; equal scores keep position order.
pub fn scan<'d>(
    query: &str,
    documents: impl IntoIterator<Item = (u32, Document<'d>)>,
    limit: usize,
) -> Vec<(u32, f32)> {
    let mut stems: Vec<String> = Words::default().of(query).into_iter().filter(|stem| !STOP.contains(stem)).collect();
    stems.sort_unstable();
    stems.dedup();
    if stems.is_empty() {
        return Vec::new();
    }
    let mut ranked = Vec::new();
    for (position, document) in documents {
        let mut score = 0.0;
        let mut read = |text: &str, weight: f32| {
            let text = text.to_lowercase();
            score += weight * stems.iter().map(|stem| text.matches(stem.as_str()).count() as f32).sum::<f32>();
        };
        read(document.name, NAME_WEIGHT);
        for alias in document.aliases {
            read(alias, NAME_WEIGHT);
        }
        read(document.description, 1.0);
        for (name, description) in document.parameters {
            read(name, PARAMETER_WEIGHT);
            read(description, PARAMETER_WEIGHT);
        }
        if score > 0.0 {
            ranked.push((position, score));
        }
    }
    ranked.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked.truncate(limit);
    ranked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_whose_words_begin_with_the_query_stems_come_first() {
        let documents = [
            Document { name: "create_issue", description: "Creates an issue", ..Document::default() },
            Document { name: "send_message", description: "Posts a message", ..Document::default() },
        ];
        let found = scan("creating issues", documents.iter().copied().enumerate().map(|(i, d)| (i as u32, d)), 8);
        assert_eq!(found.iter().map(|&(d, _)| d).collect::<Vec<_>>(), [0]);
        assert!(scan("the of", documents.iter().map(|&d| (0, d)), 8).is_empty());
    }
}
