//! What the commands print: tool tables, an Execute answer for a person,
//! and writing to stdout.

use anyhow::Context;

use crate::{catalog::Tool, proto::v1 as pb};

/// An Execute answer for a person: the outcome first, then repairs and detail.
pub(crate) fn describe_outcome(response: &pb::ExecuteResponse) -> String {
    let mut out = String::new();
    match (&response.error, response.ok) {
        (_, true) => out.push_str(&format!("ok: {}\n", response.tool)),
        (Some(error), false) => {
            let kind = pb::ErrorKind::try_from(error.kind).map(|k| k.as_str_name()).unwrap_or("ERROR_KIND_UNSPECIFIED");
            let kind = kind.trim_start_matches("ERROR_KIND_");
            let retry = if error.retryable { "retryable" } else { "not retryable" };
            out.push_str(&format!("error: {kind} ({retry})\n{}\n", error.message));
        }
        (None, false) => out.push_str("error: the gateway answered without an error\n"),
    }
    if response.replayed {
        out.push_str("replayed: the first answer to this idempotency key; the tool did not run again\n");
    }
    for repair in &response.repairs {
        let what = match pb::RepairKind::try_from(repair.kind) {
            Ok(pb::RepairKind::ToolName) => "tool name",
            Ok(pb::RepairKind::ArgumentName) => "argument name",
            Ok(pb::RepairKind::ArgumentsJson) => "arguments JSON",
            Ok(pb::RepairKind::ArgumentValue) => "argument value",
            Ok(pb::RepairKind::ArgumentsEnvelope) => "arguments envelope",
            Ok(pb::RepairKind::WordsDropped) => "words dropped",
            Ok(pb::RepairKind::Unspecified) | Err(_) => "something",
        };
        out.push_str(&format!("repaired {what}: {:?} -> {:?}\n", repair.original, repair.repaired));
    }
    if response.ok && !response.arguments_json.is_empty() {
        out.push_str(&format!("arguments: {}\n", response.arguments_json));
    }
    if response.ok && !response.result_json.is_empty() {
        let pretty = serde_json::from_str::<serde_json::Value>(&response.result_json)
            .ok()
            .and_then(|v| serde_json::to_string_pretty(&v).ok())
            .unwrap_or_else(|| response.result_json.clone());
        out.push_str(&format!("result: {pretty}\n"));
    }
    out
}

/// Writes `text` and a final newline to stdout. A reader that went away
/// (`toolgate tools list | head`) is not an error.
pub(crate) fn emit(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let newline = if text.ends_with('\n') { "" } else { "\n" };
    match out.write_all(text.as_bytes()).and_then(|()| out.write_all(newline.as_bytes())).and_then(|()| out.flush()) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => Err(err).context("cannot write to stdout"),
        _ => Ok(()),
    }
}

pub(crate) fn table<'a>(tools: impl IntoIterator<Item = &'a Tool>) -> String {
    let rows: Vec<[String; 4]> = tools
        .into_iter()
        .map(|t| {
            let mut description: String = t.description.chars().take(60).collect();
            if t.description.chars().count() > 60 {
                description.push('…');
            }
            [t.name.clone(), t.source.to_string(), t.aliases.join(", "), description]
        })
        .collect();
    let header = ["NAME", "SOURCE", "ALIASES", "DESCRIPTION"].map(str::to_owned);
    let widths: Vec<usize> =
        (0..3).map(|i| rows.iter().chain([&header]).map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in [&header].into_iter().chain(&rows) {
        let line = format!(
            "{:w0$}  {:w1$}  {:w2$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
