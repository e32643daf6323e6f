//! The stderr of a child process (a command backend, an MCP server) goes to
//! the gateway's log, never to a model.

use tokio::io::{AsyncRead, AsyncReadExt};

/// Longest line logged; the rest of a longer line is dropped.
const MAX_LINE: usize = 1024;

/// Reads `stderr` to its end and hands each line (cut to 1 KiB, lossily
/// decoded) to `log`, until `max_total` bytes were logged; the rest is read
/// and dropped, so the child never blocks on a full pipe.
pub async fn log_lines(mut stderr: impl AsyncRead + Unpin, max_total: usize, log: impl Fn(&str)) {
    let (mut buffer, mut line, mut logged) = ([0u8; 8192], Vec::with_capacity(MAX_LINE), 0usize);
    let mut flush = |line: &mut Vec<u8>| {
        if !line.is_empty() && logged < max_total {
            logged += line.len();
            log(String::from_utf8_lossy(line).trim_end());
        }
        line.clear();
    };
    while let Ok(read) = stderr.read(&mut buffer).await {
        if read == 0 {
            break;
        }
        for &byte in &buffer[..read] {
            match byte {
                b'\n' => flush(&mut line),
                _ if line.len() < MAX_LINE => line.push(byte),
                _ => {}
            }
        }
    }
    flush(&mut line);
}
