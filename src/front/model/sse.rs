//! Server-sent events as they pass (the WHATWG HTML standard, "Server-sent
//! events", section 9.2.6): a [`Decoder`] that yields each whole event as
//! its bytes, byte for byte, and the `data` of an event. An event ends at a
//! blank line; a line ends at CRLF, LF or CR alone, in any mix. Each byte
//! is looked at once: an event that arrives in many pieces is not
//! rescanned from its start.

use bytes::{Bytes, BytesMut};
use tokio_util::codec::Decoder;

/// Splits a stream's bytes into its events, each with its blank line.
#[derive(Debug)]
pub(super) struct Frames {
    /// Where in the buffer the search goes on.
    scanned: usize,
    /// Whether the scan is at the start of a line (a line end there is a
    /// blank line, which ends the event).
    line_start: bool,
    /// The last byte scanned was a CR at the end of what had come: an LF
    /// next is the rest of its line end, not a line end of its own (the
    /// event it ended was not kept waiting for it).
    after_cr: bool,
}

impl Default for Frames {
    fn default() -> Self {
        Self { scanned: 0, line_start: true, after_cr: false }
    }
}

impl Decoder for Frames {
    type Item = Bytes;
    type Error = std::io::Error;

    fn decode(&mut self, buffer: &mut BytesMut) -> Result<Option<Bytes>, Self::Error> {
        let mut at = self.scanned;
        while at < buffer.len() {
            let byte = buffer[at];
            at += 1;
            // The LF of a CRLF whose CR came at the end of a piece.
            if std::mem::take(&mut self.after_cr) && byte == b'\n' {
                continue;
            }
            if byte != b'\n' && byte != b'\r' {
                self.line_start = false;
                continue;
            }
            if byte == b'\r' {
                match buffer.get(at) {
                    Some(b'\n') => at += 1,
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            if std::mem::replace(&mut self.line_start, true) {
                self.scanned = 0;
                return Ok(Some(buffer.split_to(at).freeze()));
            }
        }
        self.scanned = at;
        Ok(None)
    }

    /// At the end of the stream, an event without its blank line is what
    /// is left, as it is.
    fn decode_eof(&mut self, buffer: &mut BytesMut) -> Result<Option<Bytes>, Self::Error> {
        if let Some(event) = self.decode(buffer)? {
            return Ok(Some(event));
        }
        *self = Self::default();
        Ok((!buffer.is_empty()).then(|| buffer.split().freeze()))
    }
}

/// The `data` of an event: its `data` fields joined by newlines; `None`
/// for an event without one (a comment).
pub(super) fn data(event: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(event).ok()?;
    let mut data: Option<String> = None;
    // A CRLF gives an empty line between its halves: no field.
    for line in text.split(['\n', '\r']) {
        let value = match line.strip_prefix("data") {
            Some("") => "",
            Some(rest) => match rest.strip_prefix(':') {
                Some(value) => value.strip_prefix(' ').unwrap_or(value),
                None => continue,
            },
            None => continue,
        };
        match &mut data {
            Some(data) => {
                data.push('\n');
                data.push_str(value);
            }
            None => data = Some(value.to_owned()),
        }
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every event `pieces` completes, fed one piece at a time, and what is
    /// left at the end.
    fn frames(pieces: &[&[u8]]) -> (Vec<Bytes>, Option<Bytes>) {
        let (mut frames, mut buffer, mut events) = (Frames::default(), BytesMut::new(), Vec::new());
        for piece in pieces {
            buffer.extend_from_slice(piece);
            while let Some(event) = frames.decode(&mut buffer).unwrap() {
                events.push(event);
            }
        }
        (events, frames.decode_eof(&mut buffer).unwrap())
    }

    #[test]
    fn events_end_at_a_blank_line_of_any_line_end() {
        let (events, rest) = frames(&[b"data: a\n\ndata: b\r\n\r\n: keep\r\rdata: c\r\n\ndata: d"]);
        assert_eq!(events, [&b"data: a\n\n"[..], b"data: b\r\n\r\n", b": keep\r\r", b"data: c\r\n\n"]);
        assert_eq!(rest.as_deref(), Some(&b"data: d"[..]));
    }

    #[test]
    fn a_line_end_split_across_pieces_is_one_line_end() {
        // CRLF split after its CR: one line end, not two; an event that
        // ends at a CR is not kept waiting for a possible LF, which then
        // passes before the next event.
        let (events, rest) = frames(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\ndata: c\n\n"]);
        assert_eq!(events, [&b"data: a\r\ndata: b\r\n\r"[..], b"\ndata: c\n\n"]);
        assert_eq!(rest, None);
        // CR alone, then the next line.
        let (events, rest) = frames(&[b"data: a\r", b"\r", b"data: b\r\r"]);
        assert_eq!(events, [&b"data: a\r\r"[..], b"data: b\r\r"]);
        assert_eq!(rest, None);
        // Byte by byte, the same events as whole, every byte passed once
        // and in order (an LF after a CR that ended an event goes first
        // in the next one).
        let text = b"data: x\r\n\r\n: c\n\ndata: y\r\rdata: z\n\r\n";
        let whole = [&b"data: x\r\n\r\n"[..], b": c\n\n", b"data: y\r\r", b"data: z\n\r\n"];
        assert_eq!(frames(&[text]).0, whole);
        let pieces: Vec<&[u8]> = text.chunks(1).collect();
        let (events, rest) = frames(&pieces);
        let datas = |events: &[Bytes]| events.iter().map(|e| data(e)).collect::<Vec<_>>();
        assert_eq!(datas(&events), datas(&whole.map(Bytes::from_static)));
        assert_eq!([events.concat(), rest.map(|r| r.to_vec()).unwrap_or_default()].concat(), text);
    }

    #[test]
    fn data_fields_are_joined_whatever_the_line_ends() {
        assert_eq!(data(b"data: a\r\ndata:b\rdata\n\n").as_deref(), Some("a\nb\n"));
        assert_eq!(data(b"event: x\ndata: {\"k\": 1}\n\n").as_deref(), Some("{\"k\": 1}"));
        assert_eq!(data(b": comment\r\r"), None);
        assert_eq!(data(b"datum: no\n\n"), None);
    }
}
