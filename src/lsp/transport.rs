//! The language server's transport: messages read from stdin one by one (a malformed one is
//! skipped, not fatal) and written to stdout from a bounded outbox.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::Duration;

use lsp_server::{Connection, Message, Notification, Response};
use serde_json::Value;

/// Largest message body read (a `Content-Length` above it is refused, not allocated).
const MAX_MESSAGE: usize = 256 * 1024 * 1024;

/// Sent by [`finish`] through the server's channel: everything before it is written, then
/// the writing ends.
const STOP: &str = "$/txlint/stop";

/// How long [`finish`] waits for a client to read what is still unwritten.
const LAST_WORDS: Duration = Duration::from_secs(2);

/// The threads behind a [`stdio`] connection.
pub struct Io {
    pump: std::thread::JoinHandle<()>,
    written: mpsc::Receiver<()>,
}

/// End a [`stdio`] connection: write what the server sent, then let the process exit. A
/// client that has stopped reading gets [`LAST_WORDS`] to take it; the process does not wait
/// on a full pipe (nor on the reader, which may still wait on stdin).
pub fn finish(connection: Connection, io: Io) {
    let _ = connection
        .sender
        .send(Notification::new(STOP.to_string(), Value::Null).into());
    drop(connection);
    let _ = io.pump.join();
    let _ = io.written.recv_timeout(LAST_WORDS);
}

/// The server's end of a connection over stdin and stdout, with the threads that move the
/// bytes. Unlike lsp-server's own transport, a malformed message (a bad header, a bad
/// `Content-Length`, invalid JSON) is logged on stderr and skipped: one client bug does not end
/// every diagnostic of the session. What waits to be written is bounded (see [`Outbox`]).
pub fn stdio() -> (Connection, Io) {
    let (server, bridge) = Connection::memory();
    let Connection { sender, receiver } = bridge;
    // Answers to requests that could not be read go out with the server's own messages.
    let answers = server.sender.clone();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut input = std::io::BufReader::new(stdin.lock());
        loop {
            match read_message(&mut input) {
                Ok(Some(Ok(msg))) => {
                    if sender.send(msg).is_err() {
                        return;
                    }
                }
                Ok(Some(Err(bad))) => {
                    eprintln!("txlint lsp: skipped a malformed message: {}", bad.why);
                    if let Some(id) = bad.id {
                        let code = lsp_server::ErrorCode::InvalidRequest as i32;
                        let _ = answers.send(Response::new_err(id, code, bad.why).into());
                    }
                }
                Ok(None) | Err(_) => return,
            }
        }
    });
    let outbox = Arc::new(Outbox::default());
    // The pump never blocks on the client: it moves the server's messages into the outbox.
    let into = Arc::clone(&outbox);
    let pump = std::thread::spawn(move || {
        for msg in receiver {
            // The reader keeps a sender for its answers, so the channel never closes on its
            // own while the client holds stdin open: the server's last word is `STOP`.
            if matches!(&msg, Message::Notification(n) if n.method == STOP) {
                break;
            }
            into.push(msg);
        }
        into.close();
    });
    let (done, written) = mpsc::channel();
    std::thread::spawn(move || {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        while let Some(msg) = outbox.pop() {
            if msg.write(&mut out).is_err() {
                break;
            }
        }
        let _ = done.send(());
    });
    (server, Io { pump, written })
}

/// The messages waiting for the client, in order, with a document's diagnostics written at most
/// once: a newer publish for a document replaces the one still waiting, so a client that stops
/// reading costs one list of diagnostics per document (and the answers to its own requests),
/// not one per edit.
#[derive(Default)]
struct Outbox {
    state: Mutex<(VecDeque<Message>, bool)>,
    ready: Condvar,
}

impl Outbox {
    fn push(&self, msg: Message) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let queue = &mut state.0;
        let waiting = published(&msg).and_then(|uri| {
            queue
                .iter_mut()
                .find(|m| published(m).is_some_and(|u| u == uri))
        });
        match waiting {
            Some(older) => *older = msg,
            None => queue.push_back(msg),
        }
        self.ready.notify_one();
    }

    /// No more messages: [`Outbox::pop`] returns `None` once the queue is empty.
    fn close(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
        self.ready.notify_one();
    }

    /// The next message, waiting for one; `None` when closed and empty.
    fn pop(&self) -> Option<Message> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(msg) = state.0.pop_front() {
                return Some(msg);
            }
            if state.1 {
                return None;
            }
            state = self.ready.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).0.len()
    }
}

/// The document a `publishDiagnostics` notification is for.
fn published(msg: &Message) -> Option<&str> {
    match msg {
        Message::Notification(n) if n.method == "textDocument/publishDiagnostics" => {
            n.params["uri"].as_str()
        }
        _ => None,
    }
}

/// A message that could not be used: why, and the id of the request it was, if that much could
/// be read.
#[derive(Debug)]
pub struct Malformed {
    pub why: String,
    pub id: Option<lsp_server::RequestId>,
}

impl From<String> for Malformed {
    fn from(why: String) -> Self {
        Malformed { why, id: None }
    }
}

/// `Name: value`, the name a token of letters, digits and `-`.
fn is_header(line: &str) -> bool {
    line.split_once(':').is_some_and(|(name, _)| {
        !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    })
}

/// Longest header line read; the rest of a longer one is skipped unread into memory.
const MAX_HEADER: u64 = 8 * 1024;

/// The next header line (with its line break), `None` at the end of input. A line that is not
/// UTF-8 or longer than [`MAX_HEADER`] is consumed and given as an error.
fn read_header_line(
    r: &mut impl std::io::BufRead,
    line: &mut Vec<u8>,
) -> std::io::Result<Option<Result<String, String>>> {
    line.clear();
    let mut limited = std::io::Read::take(&mut *r, MAX_HEADER);
    let n = std::io::BufRead::read_until(&mut limited, b'\n', line)?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') && n as u64 == MAX_HEADER {
        // Skip the rest of the line without keeping it.
        loop {
            let buf = r.fill_buf()?;
            if buf.is_empty() {
                break;
            }
            match buf.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    r.consume(i + 1);
                    break;
                }
                None => {
                    let all = buf.len();
                    r.consume(all);
                }
            }
        }
        return Ok(Some(Err(format!(
            "a header line longer than {MAX_HEADER} bytes"
        ))));
    }
    Ok(Some(match std::str::from_utf8(line) {
        Ok(text) => Ok(text.to_string()),
        Err(_) => Err(format!(
            "a header line that is not UTF-8: `{}`",
            String::from_utf8_lossy(line).trim_end()
        )),
    }))
}

/// One message of the base protocol: `None` at the end of input, `Some(Err(..))` for one that
/// cannot be used (its bytes are consumed, so the next one is read whole).
pub fn read_message(
    r: &mut impl std::io::BufRead,
) -> std::io::Result<Option<Result<Message, Malformed>>> {
    let mut length: Option<Result<usize, String>> = None;
    let mut line = Vec::new();
    loop {
        let Some(header) = read_header_line(r, &mut line)? else {
            return Ok(None);
        };
        let header = match header {
            Ok(h) => h,
            Err(why) => return Ok(Some(Err(why.into()))),
        };
        let header = header.trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            if length.is_some() {
                break;
            }
            // Blank lines between messages: skip them.
            continue;
        }
        // A `Content-Length` anywhere in the line: after a message whose length was wrong, the
        // rest of its body (or of the header it cut into) comes first, and the stream is in step
        // again from the next message.
        let lower = header.to_ascii_lowercase();
        match lower.rfind("content-length:") {
            Some(at) => {
                let value = header[at + "content-length:".len()..].trim();
                length = Some(match value.parse::<usize>() {
                    Ok(n) if n <= MAX_MESSAGE => Ok(n),
                    Ok(n) => Err(format!("Content-Length {n} is larger than {MAX_MESSAGE}")),
                    Err(_) => Err(format!("bad Content-Length `{value}`")),
                });
            }
            // Another header (`Content-Type`): nothing to read in it.
            None if is_header(header) => {}
            None => {
                let shown: String = header.chars().take(80).collect();
                eprintln!("txlint lsp: skipped a malformed header: `{shown}`");
            }
        }
    }
    let n = match length {
        Some(Ok(n)) => n,
        Some(Err(why)) => return Ok(Some(Err(why.into()))),
        None => return Ok(Some(Err("no Content-Length".to_string().into()))),
    };
    let mut body = vec![0; n];
    r.read_exact(&mut body)?;
    Ok(Some(serde_json::from_slice::<Message>(&body).map_err(
        |e| {
            // Valid JSON that is not a message: answer it if it has an id.
            let id = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| match &v["id"] {
                    Value::Number(n) => n
                        .as_i64()
                        .and_then(|n| i32::try_from(n).ok())
                        .map(Into::into),
                    Value::String(s) => Some(s.clone().into()),
                    _ => None,
                });
            Malformed {
                why: format!("not a JSON-RPC message: {e}"),
                id,
            }
        },
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_publish_replaces_the_one_waiting_and_answers_keep_their_order() {
        let outbox = Outbox::default();
        let publish = |uri: &str, n: usize| -> Message {
            let params = serde_json::json!({ "uri": uri, "diagnostics": vec![n; n] });
            Notification::new("textDocument/publishDiagnostics".into(), params).into()
        };
        for edit in 0..1000 {
            outbox.push(publish("file:///a.sql", edit));
            outbox.push(publish("file:///b.sql", edit));
        }
        outbox.push(Response::new_ok(1.into(), ()).into());
        outbox.push(Response::new_ok(2.into(), ()).into());
        assert_eq!(outbox.len(), 4);
        outbox.close();
        let diagnostics = |m: Option<Message>| match m {
            Some(Message::Notification(n)) => n.params["diagnostics"].as_array().map(Vec::len),
            _ => None,
        };
        assert_eq!(diagnostics(outbox.pop()), Some(999));
        assert_eq!(diagnostics(outbox.pop()), Some(999));
        let id = |m: Option<Message>| match m {
            Some(Message::Response(r)) => Some(r.id),
            _ => None,
        };
        assert_eq!(id(outbox.pop()), Some(1.into()));
        assert_eq!(id(outbox.pop()), Some(2.into()));
        assert!(outbox.pop().is_none());
    }

    fn framed(body: &str, delta: isize) -> Vec<u8> {
        let n = body.len() as isize + delta;
        format!("Content-Length: {n}\r\n\r\n{body}").into_bytes()
    }

    fn note(method: &str) -> String {
        format!(r#"{{"jsonrpc":"2.0","method":"{method}","params":null}}"#)
    }

    /// What the stream gives: the methods of the messages read whole, `!` for each skipped.
    fn read_all(bytes: Vec<u8>) -> Vec<String> {
        let mut r = std::io::BufReader::new(&bytes[..]);
        let mut out = Vec::new();
        while let Ok(Some(m)) = read_message(&mut r) {
            out.push(match m {
                Ok(Message::Notification(n)) => n.method,
                Ok(_) => "?".to_string(),
                Err(_) => "!".to_string(),
            });
        }
        out
    }

    #[test]
    fn a_bad_header_byte_skips_one_message_not_the_session() {
        let mut bytes = b"Content-Length: 5\xff\r\n\r\n{}{}{".to_vec();
        bytes.extend(framed(&note("b"), 0));
        assert_eq!(read_all(bytes), ["!", "b"]);
    }

    #[test]
    fn a_wrong_content_length_loses_at_most_the_next_message() {
        // Three bytes short: the rest of the body comes before the next header.
        let mut short = framed(&note("a"), -3);
        short.extend(framed(&note("b"), 0));
        short.extend(framed(&note("c"), 0));
        assert_eq!(read_all(short), ["!", "b", "c"]);
        // Three bytes long: the body takes the start of the next header, whose message is lost.
        let mut long = framed(&note("a"), 3);
        long.extend(framed(&note("b"), 0));
        long.extend(framed(&note("c"), 0));
        long.extend(framed(&note("d"), 0));
        assert_eq!(read_all(long), ["!", "c", "d"]);
    }

    #[test]
    fn a_header_line_longer_than_the_limit_is_skipped_unkept() {
        let mut bytes = format!("X-Padding: {}\r\n", "p".repeat(100_000)).into_bytes();
        bytes.extend(framed(&note("b"), 0));
        assert_eq!(read_all(bytes), ["!", "b"]);
    }
}
