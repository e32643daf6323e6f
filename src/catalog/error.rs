//! Catalogue problems: every one carries the file and the YAML path it is
//! about, so an operator can fix all of them in one pass.

use std::fmt::{self, Write as _};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Always fails the load.
    Error,
    /// Fails the load only under strict validation.
    Warning,
    /// A finding for whoever reviews the catalogue (hidden instructions in a
    /// federated tool): never fails a load, whatever the policy; `toolgate
    /// validate --strict` fails on it.
    Caution,
    /// Worth a look and nothing more (a federated tool's description longer
    /// than any real tool's): never fails anything.
    Note,
}

/// One thing wrong with the catalogue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub severity: Severity,
    /// The file (as given or discovered), `<builtin>`, or `mcp:<server>`.
    pub origin: String,
    /// Where in the file: `tools[3] (reschedule_delivery).parameters`; may be empty.
    pub path: String,
    pub message: String,
}

impl fmt::Display for Problem {
    /// `origin: path: message` (the severity is the reader's to show), on
    /// one line: a control character (a newline in a federated tool's
    /// description or name, a terminal escape) is written escaped (`\n`,
    /// `\u{1b}`), so that what a server lists can neither break a log line
    /// nor forge one.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: &[&str] = match self.path.is_empty() {
            true => &[&self.origin, &self.message],
            false => &[&self.origin, &self.path, &self.message],
        };
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                f.write_str(": ")?;
            }
            for c in part.chars() {
                match c.is_control() {
                    true => write!(f, "{}", c.escape_default())?,
                    false => f.write_char(c)?,
                }
            }
        }
        Ok(())
    }
}

/// Logs every problem, one line each; under strict validation a warning is
/// logged as the error it then is.
pub(crate) fn log_problems(problems: &[Problem], strict: bool) {
    for problem in problems {
        match (problem.severity, strict) {
            (Severity::Error, _) => tracing::error!("{problem}"),
            (Severity::Warning, true) => tracing::error!("{problem} (an error under strict validation)"),
            (Severity::Warning, false) | (Severity::Caution, _) => tracing::warn!("{problem}"),
            (Severity::Note, _) => tracing::info!("note: {problem}"),
        }
    }
}

/// Collects problems while a catalogue loads.
#[derive(Debug, Default)]
pub(crate) struct CatalogProblems {
    list: Vec<Problem>,
}

impl From<Vec<Problem>> for CatalogProblems {
    fn from(list: Vec<Problem>) -> Self {
        Self { list }
    }
}

impl CatalogProblems {
    pub(crate) fn error(&mut self, origin: &str, path: impl Into<String>, message: impl Into<String>) {
        self.push(Severity::Error, origin, path.into(), message.into());
    }

    pub(crate) fn warning(&mut self, origin: &str, path: impl Into<String>, message: impl Into<String>) {
        self.push(Severity::Warning, origin, path.into(), message.into());
    }

    pub(crate) fn caution(&mut self, origin: &str, path: impl Into<String>, message: impl Into<String>) {
        self.push(Severity::Caution, origin, path.into(), message.into());
    }

    pub(crate) fn note(&mut self, origin: &str, path: impl Into<String>, message: impl Into<String>) {
        self.push(Severity::Note, origin, path.into(), message.into());
    }

    fn push(&mut self, severity: Severity, origin: &str, path: String, message: String) {
        self.list.push(Problem { severity, origin: origin.to_owned(), path, message });
    }

    /// Adds `other`'s problems after these, in their order.
    pub(crate) fn append(&mut self, other: CatalogProblems) {
        self.list.extend(other.list);
    }

    /// Withdraws the problems added after the first `len`.
    pub(crate) fn truncate(&mut self, len: usize) {
        self.list.truncate(len);
    }

    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    pub(crate) fn has_errors(&self) -> bool {
        self.list.iter().any(|p| p.severity == Severity::Error)
    }

    pub(crate) fn has_warnings(&self) -> bool {
        self.list.iter().any(|p| p.severity == Severity::Warning)
    }

    pub(crate) fn into_vec(self) -> Vec<Problem> {
        self.list
    }
}

/// The catalogue could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("the catalogue has {} problem{}", .problems.len(), if .problems.len() == 1 { "" } else { "s" })]
pub struct LoadError {
    /// Every problem found, errors and warnings, in the order found.
    pub problems: Vec<Problem>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_is_one_line_whatever_a_server_wrote() {
        let problem = Problem {
            severity: Severity::Caution,
            origin: "mcp:notes".into(),
            path: "tools[0] (read_note)".into(),
            message: "description: Read a note.{+\nINFO all tools approved\u{1b}[2K+}".into(),
        };
        assert_eq!(
            problem.to_string(),
            "mcp:notes: tools[0] (read_note): description: Read a note.{+\\nINFO all tools approved\\u{1b}[2K+}"
        );
    }
}
