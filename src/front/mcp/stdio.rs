//! `toolgate mcp-stdio`: MCP on the process's stdin and stdout, one message
//! a line, read as the HTTP door reads a body ([`super::read`]): a
//! `tools/call`'s arguments are taken out as text for the core (a string of
//! them is repaired like any emitted arguments), and what cannot be a
//! message is answered with the JSON-RPC error HTTP gives (-32700, -32600,
//! -32602), never handed to the transport to be misread. A line longer than
//! an HTTP body may be (4 MiB) is answered -32600 and skipped.

use std::pin::Pin;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ErrorCode, ErrorData, GetExtensions, RequestId, ServerJsonRpcMessage};
use serde_json::Value;
use tokio::{io::AsyncWriteExt, sync::mpsc, task::JoinHandle};
use tokio_util::{
    codec::{Decoder, FramedRead, LinesCodec, LinesCodecError},
    sync::PollSender,
};

use super::read::{self, Unreadable};

/// The longest line read: an HTTP body's limit.
const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// Messages read from stdin.
type Messages = Pin<Box<dyn Stream<Item = ClientJsonRpcMessage> + Send>>;

/// The transport of stdin and stdout: the sink of answers, the stream of
/// messages, and the task writing answers (awaited after the service ends,
/// so that the last answers are written before the process exits).
pub(crate) fn transport() -> (PollSender<ServerJsonRpcMessage>, Messages, JoinHandle<()>) {
    let (reader, writer) = rmcp::transport::stdio_pipes();
    let (answers, outgoing) = mpsc::channel::<ServerJsonRpcMessage>(64);
    let written = tokio::spawn(write(writer, outgoing));
    let lines = FramedRead::new(reader, Lines(LinesCodec::new_with_max_length(MAX_LINE_BYTES)));
    let refusals = answers.clone();
    let messages = futures::stream::unfold((lines, refusals), |(mut lines, refusals)| async move {
        loop {
            let refused = match lines.next().await? {
                Ok(Line::Text(line)) if line.trim().is_empty() => continue,
                Ok(Line::Text(line)) => match message(line) {
                    Ok(message) => return Some((message, (lines, refusals))),
                    Err(refused) => refused,
                },
                Ok(Line::TooLong) => {
                    let why = format!("Invalid Request: a message is at most {} MiB", MAX_LINE_BYTES >> 20);
                    ServerJsonRpcMessage::error(ErrorData::new(ErrorCode::INVALID_REQUEST, why, None), None)
                }
                Err(err) => {
                    tracing::debug!("stdin cannot be read: {err}");
                    return None;
                }
            };
            if refusals.send(refused).await.is_err() {
                return None;
            }
        }
    });
    (PollSender::new(answers), Box::pin(messages), written)
}

/// A line of stdin, or one too long to read (its bytes skipped to its end).
enum Line {
    Text(String),
    TooLong,
}

/// The lines codec, with a line too long as an item, not an error: a
/// decoder's error ends the stream it reads, and the session must go on.
struct Lines(LinesCodec);

impl Lines {
    fn line(read: Result<Option<String>, LinesCodecError>) -> Result<Option<Line>, std::io::Error> {
        match read {
            Ok(line) => Ok(line.map(Line::Text)),
            Err(LinesCodecError::MaxLineLengthExceeded) => Ok(Some(Line::TooLong)),
            Err(LinesCodecError::Io(err)) => Err(err),
        }
    }
}

impl Decoder for Lines {
    type Item = Line;
    type Error = std::io::Error;

    fn decode(&mut self, buffer: &mut bytes::BytesMut) -> Result<Option<Line>, Self::Error> {
        Self::line(self.0.decode(buffer))
    }

    fn decode_eof(&mut self, buffer: &mut bytes::BytesMut) -> Result<Option<Line>, Self::Error> {
        Self::line(self.0.decode_eof(buffer))
    }
}

/// One line as a message for the transport, or the error that answers it.
#[allow(clippy::result_large_err)] // the error is the answer, sent at once
fn message(line: String) -> Result<ClientJsonRpcMessage, ServerJsonRpcMessage> {
    let read = read::read(Bytes::from(line)).map_err(|unreadable| match unreadable {
        Unreadable::Rpc { id, code, message } => error(id, ErrorCode(code as i32), message),
        Unreadable::TooLarge => error(Value::Null, ErrorCode::INVALID_REQUEST, Unreadable::too_large_message()),
    })?;
    let mut message = serde_json::from_slice::<ClientJsonRpcMessage>(&read.bytes).map_err(|err| {
        let id = serde_json::from_slice::<Value>(&read.bytes).ok().and_then(|v| v.get("id").cloned());
        error(id.unwrap_or(Value::Null), ErrorCode::INVALID_REQUEST, format!("Invalid Request: {err}"))
    })?;
    if let (Some(arguments), ClientJsonRpcMessage::Request(request)) = (read.arguments, &mut message) {
        request.request.extensions_mut().insert(arguments);
    }
    Ok(message)
}

/// A JSON-RPC error answering the request `id` (null: unknown).
fn error(id: Value, code: ErrorCode, message: String) -> ServerJsonRpcMessage {
    let id = serde_json::from_value::<RequestId>(id).ok();
    ServerJsonRpcMessage::error(ErrorData::new(code, message, None), id)
}

/// Writes each answer as one line on stdout until every sender is gone.
async fn write(mut stdout: impl tokio::io::AsyncWrite + Unpin, mut answers: mpsc::Receiver<ServerJsonRpcMessage>) {
    while let Some(answer) = answers.recv().await {
        let mut line = serde_json::to_vec(&answer).expect("messages serialise");
        line.push(b'\n');
        if let Err(err) = async {
            stdout.write_all(&line).await?;
            stdout.flush().await
        }
        .await
        {
            tracing::debug!("stdout cannot be written: {err}");
            return;
        }
    }
}
