//! `txlint lsp`: diagnostics in the editor over the Language Server Protocol (stdio).
//!
//! Synchronous and ordered (lsp-server, as ruff and squawk use): every open, change and save of
//! a `.sql` or `.rs` document lints that document's current text with the configuration found
//! from its folder, and publishes the findings. Changes are incremental; positions are UTF-16
//! code units unless the client offers UTF-8. A change on disk to a `txlint.toml` or to a file
//! of the project (watched where the client can) lints the open documents again. Hover on a
//! finding shows its rule's summary with a link to the rule's page.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use lsp_server::{Connection, Message, Notification, Response};

mod transport;
use serde_json::{Value, json};
pub use transport::{Io, Malformed, finish, read_message, stdio};

use crate::config::Config;
use crate::diagnostic::Severity;
use crate::source::{SourceFile, Span};

/// What [`serve`] returns when the client ends it with `exit` before `shutdown`: the process
/// then exits with status 1, as the protocol asks.
pub const EXIT_WITHOUT_SHUTDOWN: &str = "the client sent `exit` without `shutdown`";

/// Serve until the client shuts down.
pub fn serve(connection: &Connection, cwd: &Path) -> Result<(), String> {
    let Some((id, params)) = initialize(connection)? else {
        return Err(EXIT_WITHOUT_SHUTDOWN.to_string());
    };
    let utf8 = params["capabilities"]["general"]["positionEncodings"]
        .as_array()
        .is_some_and(|encodings| encodings.iter().any(|e| e == "utf-8"));
    let result = json!({
        "capabilities": {
            "positionEncoding": if utf8 { "utf-8" } else { "utf-16" },
            "textDocumentSync": { "openClose": true, "change": 2, "save": { "includeText": true } },
            "codeActionProvider": { "codeActionKinds": ["quickfix"] },
            "hoverProvider": true,
        },
        "serverInfo": { "name": "txlint", "version": env!("CARGO_PKG_VERSION") },
    });
    send(connection, Response::new_ok(id, result).into())?;
    let mut server = Server {
        connection,
        cwd,
        utf8,
        // Asked once the client says `initialized`: it may be asked things from then on.
        watch: params["capabilities"]["workspace"]["didChangeWatchedFiles"]["dynamicRegistration"]
            .as_bool()
            .unwrap_or(false),
        docs: HashMap::new(),
        shut_down: false,
    };
    while let Ok(first) = connection.receiver.recv() {
        // Everything that has arrived meanwhile is one batch: a document changed ten times is
        // linted once, at its latest version.
        let batch = std::iter::once(first).chain(connection.receiver.try_iter());
        let mut dirty: Vec<String> = Vec::new();
        for msg in batch.collect::<Vec<_>>() {
            match msg {
                Message::Request(req) => {
                    let resp = server.answer(req);
                    send(connection, resp.into())?;
                }
                Message::Notification(n) if n.method == "exit" => {
                    return match server.shut_down {
                        true => Ok(()),
                        false => Err(EXIT_WITHOUT_SHUTDOWN.to_string()),
                    };
                }
                Message::Notification(n) => server.notified(n, &mut dirty)?,
                Message::Response(_) => {}
            }
        }
        server.republish(dirty)?;
    }
    Ok(())
}

/// The server's state after the handshake.
struct Server<'c> {
    connection: &'c Connection,
    cwd: &'c Path,
    /// Positions are in UTF-8 bytes (else UTF-16 code units).
    utf8: bool,
    /// The client registers file watchers when asked.
    watch: bool,
    docs: HashMap<String, Doc>,
    shut_down: bool,
}

impl Server<'_> {
    /// The answer to a request.
    fn answer(&mut self, req: lsp_server::Request) -> Response {
        let invalid = lsp_server::ErrorCode::InvalidRequest as i32;
        if self.shut_down {
            Response::new_err(req.id, invalid, "the server is shutting down".to_string())
        } else if req.method == "initialize" {
            Response::new_err(
                req.id,
                invalid,
                "the server is initialized already".to_string(),
            )
        } else if req.method == "shutdown" {
            self.shut_down = true;
            Response::new_ok(req.id, ())
        } else if req.method == "textDocument/codeAction" {
            Response::new_ok(req.id, code_actions(&req.params, &self.docs))
        } else if req.method == "textDocument/hover" {
            Response::new_ok(req.id, hover(&req.params, &self.docs, self.utf8))
        } else {
            Response::new_err(
                req.id,
                lsp_server::ErrorCode::MethodNotFound as i32,
                format!("txlint does not handle {}", req.method),
            )
        }
    }

    /// Lint the documents again and publish what they have now.
    fn republish(&mut self, dirty: Vec<String>) -> Result<(), String> {
        for uri in dirty {
            if let Some(doc) = self.docs.get_mut(&uri) {
                doc.found = lint(&uri, &doc.text, &doc.language, self.cwd, self.utf8);
                send(self.connection, publish(&uri, doc.found.clone()))?;
            }
        }
        Ok(())
    }

    /// A notification other than `exit`: documents whose findings are to be published again
    /// are added to `dirty`.
    fn notified(
        &mut self,
        n: lsp_server::Notification,
        dirty: &mut Vec<String>,
    ) -> Result<(), String> {
        if n.method == "initialized" {
            if self.watch {
                send(self.connection, watch_request())?;
            }
            return Ok(());
        }
        if n.method == "workspace/didChangeWatchedFiles" {
            // The configuration or the project's context changed: lint everything open.
            for uri in self.docs.keys() {
                if !dirty.contains(uri) {
                    dirty.push(uri.clone());
                }
            }
            return Ok(());
        }
        let Some(uri) = n.params["textDocument"]["uri"].as_str().map(str::to_string) else {
            return Ok(());
        };
        let text = match n.method.as_str() {
            "textDocument/didOpen" => n.params["textDocument"]["text"]
                .as_str()
                .map(str::to_string),
            "textDocument/didChange" => {
                let Some(doc) = self.docs.get_mut(&uri) else {
                    return Ok(());
                };
                let changes = n.params["contentChanges"].as_array();
                for change in changes.into_iter().flatten() {
                    apply(&mut doc.text, change, self.utf8);
                }
                None
            }
            // A save of a document the client never opened here is not ours to keep or
            // publish.
            "textDocument/didSave" if !self.docs.contains_key(&uri) => return Ok(()),
            "textDocument/didSave" => n.params["text"].as_str().map(str::to_string),
            "textDocument/didClose" => {
                self.docs.remove(&uri);
                dirty.retain(|u| *u != uri);
                return send(self.connection, publish(&uri, Vec::new()));
            }
            _ => return Ok(()),
        };
        let language = n.params["textDocument"]["languageId"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let entry = self.docs.entry(uri.clone()).or_insert(Doc {
            text: String::new(),
            language,
            found: Vec::new(),
        });
        if let Some(text) = text {
            entry.text = text;
        }
        if !dirty.contains(&uri) {
            dirty.push(uri);
        }
        Ok(())
    }
}

/// Wait for the client's `initialize` request: its id and parameters, or `None` when the client
/// sends `exit` first. Until then a request is answered "not initialized" and other messages are
/// dropped, as the protocol asks (lsp-server's handshake ends the session on them instead).
fn initialize(connection: &Connection) -> Result<Option<(lsp_server::RequestId, Value)>, String> {
    loop {
        let msg = connection
            .receiver
            .recv()
            .map_err(|_| "the client closed the connection before `initialize`".to_string())?;
        match msg {
            Message::Request(req) if req.method == "initialize" => {
                return Ok(Some((req.id, req.params)));
            }
            Message::Request(req) => {
                let code = lsp_server::ErrorCode::ServerNotInitialized as i32;
                let why = format!("`{}` before `initialize`", req.method);
                send(connection, Response::new_err(req.id, code, why).into())?;
            }
            Message::Notification(n) if n.method == "exit" => return Ok(None),
            Message::Notification(_) | Message::Response(_) => {}
        }
    }
}

/// An open document: its text, the client's language for it, and its last diagnostics.
struct Doc {
    text: String,
    language: String,
    found: Vec<Value>,
}

/// Ask the client to tell the server about changes on disk: configuration files, and the
/// `.sql` and `.rs` files that are the open documents' context.
fn watch_request() -> Message {
    let watchers: Vec<Value> = ["**/txlint.toml", "**/*.sql", "**/*.rs"]
        .iter()
        .map(|g| json!({ "globPattern": g }))
        .collect();
    lsp_server::Request::new(
        "txlint/watch".to_string().into(),
        "client/registerCapability".to_string(),
        json!({ "registrations": [{
            "id": "txlint-watch",
            "method": "workspace/didChangeWatchedFiles",
            "registerOptions": { "watchers": watchers },
        }] }),
    )
    .into()
}

/// Apply one `contentChanges` entry: a range replaced, or (without a range) the whole text.
fn apply(text: &mut String, change: &Value, utf8: bool) {
    let Some(new) = change["text"].as_str() else {
        return;
    };
    let range = &change["range"];
    if range.is_null() {
        *text = new.to_string();
        return;
    }
    let start = offset_of(text, &range["start"], utf8);
    let end = offset_of(text, &range["end"], utf8).max(start);
    text.replace_range(start..end, new);
}

/// The byte offset of an LSP position (0-based line; character in UTF-16 units, or bytes with
/// UTF-8), clamped to the text: past the end of a line is its end, past the last line the end.
fn offset_of(text: &str, position: &Value, utf8: bool) -> usize {
    let line = position["line"].as_u64().unwrap_or(0) as usize;
    let character = position["character"].as_u64().unwrap_or(0) as usize;
    let mut start = 0;
    for _ in 0..line {
        match text[start..].find('\n') {
            Some(i) => start += i + 1,
            None => return text.len(),
        }
    }
    let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let line_text = &text[start..end];
    if utf8 {
        let mut at = character.min(line_text.len());
        while !line_text.is_char_boundary(at) {
            at -= 1;
        }
        return start + at;
    }
    let mut units = 0;
    for (i, c) in line_text.char_indices() {
        if units >= character {
            return start + i;
        }
        units += c.len_utf16();
    }
    end
}

/// The rule's summary and page for the findings under the cursor, or `null`.
fn hover(params: &Value, docs: &HashMap<String, Doc>, utf8: bool) -> Value {
    let Some(doc) = params["textDocument"]["uri"]
        .as_str()
        .and_then(|u| docs.get(u))
    else {
        return Value::Null;
    };
    let at = offset_of(&doc.text, &params["position"], utf8);
    let mut parts: Vec<String> = Vec::new();
    for d in &doc.found {
        let start = offset_of(&doc.text, &d["range"]["start"], utf8);
        let end = offset_of(&doc.text, &d["range"]["end"], utf8);
        let Some(rule) = d["code"].as_str().and_then(crate::registry::find) else {
            continue;
        };
        if start <= at && at <= end.max(start + 1) {
            let part = format!(
                "**txlint: {}**\n\n{}\n\n[{}]({})",
                rule.name,
                rule.summary(),
                "Rule page",
                rule.url()
            );
            if !parts.contains(&part) {
                parts.push(part);
            }
        }
    }
    match parts.is_empty() {
        true => Value::Null,
        false => json!({ "contents": { "kind": "markdown", "value": parts.join("\n\n---\n\n") } }),
    }
}

/// Quick fixes for txlint's diagnostics in the request: a suppression comment on the line
/// above the finding (indented as it is), or at the top of the file for the whole file.
fn code_actions(params: &Value, docs: &HashMap<String, Doc>) -> Value {
    let Some(uri) = params["textDocument"]["uri"].as_str() else {
        return json!([]);
    };
    let Some(Doc { text, language, .. }) = docs.get(uri) else {
        return json!([]);
    };
    let rust = language == "rust" || uri.ends_with(".rs");
    let marker = if rust { "//" } else { "--" };
    let lines: Vec<&str> = text.lines().collect();
    let mut actions = Vec::new();
    let diagnostics = params["context"]["diagnostics"].as_array();
    for d in diagnostics.into_iter().flatten() {
        if d["source"] != "txlint" {
            continue;
        }
        let Some(rule) = d["code"].as_str() else {
            continue;
        };
        let line = d["range"]["start"]["line"].as_u64().unwrap_or(0) as usize;
        let indent: String = lines
            .get(line)
            .map(|l| l.chars().take_while(|c| c.is_whitespace()).collect())
            .unwrap_or_default();
        let insert = |at: usize, new_text: String| {
            json!({ "changes": { uri: [{
                "range": { "start": { "line": at, "character": 0 }, "end": { "line": at, "character": 0 } },
                "newText": new_text,
            }] } })
        };
        actions.push(json!({
            "title": format!("Suppress {rule} on this line"),
            "kind": "quickfix",
            "diagnostics": [d],
            "edit": insert(line, format!("{indent}{marker} txlint: ignore {rule}\n")),
        }));
        actions.push(json!({
            "title": format!("Suppress {rule} in this file"),
            "kind": "quickfix",
            "diagnostics": [d],
            "edit": insert(0, format!("{marker} txlint: ignore-file {rule}\n")),
        }));
    }
    json!(actions)
}

fn send(connection: &Connection, msg: Message) -> Result<(), String> {
    connection.sender.send(msg).map_err(|e| e.to_string())
}

fn publish(uri: &str, diagnostics: Vec<Value>) -> Message {
    Notification::new(
        "textDocument/publishDiagnostics".to_string(),
        json!({ "uri": uri, "diagnostics": diagnostics }),
    )
    .into()
}

/// The file path of a `file://` URI, percent-decoded.
fn path_of(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(b) = rest
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    Some(PathBuf::from(String::from_utf8_lossy(&out).into_owned()))
}

/// Lint one document's text and turn its findings into LSP diagnostics.
fn lint(uri: &str, text: &str, language: &str, cwd: &Path, utf8: bool) -> Vec<Value> {
    let path = path_of(uri).unwrap_or_else(|| {
        let ext = if language == "rust" { "rs" } else { "sql" };
        PathBuf::from(format!("untitled.{ext}"))
    });
    // Only what a run would read: `.rs`, `.sql` and `sql.extensions` files (or, for a document
    // not saved yet, the client's `sql` and `rust`), and only those the configuration does not
    // leave out.
    let on_disk = uri.starts_with("file://");
    if !on_disk && !matches!(language, "sql" | "rust") {
        return Vec::new();
    }
    let folder = path
        .parent()
        .filter(|p| p.is_dir())
        .unwrap_or(cwd)
        .to_path_buf();
    let folder = folder.as_path();
    let config = match crate::workspace::config_of(folder, None, &[]) {
        Ok(c) => c,
        // Said on the documents the defaults would read, not on every Markdown file.
        Err(_) if on_disk && !Config::default().reads(&path) => return Vec::new(),
        Err(e) => {
            let file = SourceFile::new(path.clone(), uri.to_string(), text.to_string());
            return vec![json!({
                "range": range(&file, Span::new(0, 0..0), utf8),
                "severity": 1,
                "source": "txlint",
                "message": format!("txlint cannot use its configuration: {e}"),
            })];
        }
    };
    if on_disk && !crate::workspace::selects(&config, &path, folder) {
        return Vec::new();
    }
    let display = crate::io::display_path(&path, cwd);
    // The rest of the project is context, as for `txlint check` on named files: its schema,
    // routines and the other side of a lock cycle count; only this document is reported on.
    let context = match on_disk {
        true => crate::discover::context_of(std::slice::from_ref(&path), folder, &config),
        false => Vec::new(),
    };
    let doc = SourceFile::new(path, display, text.to_string());
    let run = crate::pipeline::check_document(doc, &context, folder, &config);
    let file = &run.program.files[0];
    run.diagnostics
        .iter()
        // A finding elsewhere in the project that involves this document (the other side of a
        // cycle) is shown at its label here.
        .filter_map(|d| {
            let here = std::iter::once(d.span)
                .chain(d.labels.iter().map(|l| l.span))
                .find(|s| s.file == 0)?;
            Some((d, here))
        })
        .map(|(d, here)| {
            // The finding's own place, when it is in another file, then its labels.
            let primary = (here != d.span).then(|| (d.span, "the finding".to_string()));
            let related: Vec<Value> = primary
                .into_iter()
                .chain(d.labels.iter().map(|l| (l.span, l.message.clone())))
                .filter(|(span, _)| *span != here)
                .map(|(span, message)| {
                    let (at, uri) = match span.file {
                        0 => (file, uri.to_string()),
                        n => {
                            let f = &run.program.files[n];
                            let abs = std::path::absolute(&f.path).unwrap_or_else(|_| f.path.clone());
                            let abs = abs.to_string_lossy().replace('\\', "/");
                            (f, format!("file://{}", crate::report::sarif::encode(&abs)))
                        }
                    };
                    json!({ "location": { "uri": uri, "range": range(at, span, utf8) }, "message": message })
                })
                .collect();
            let message = match &d.help {
                Some(h) => format!("{}\nhelp: {h}", d.message),
                None => d.message.clone(),
            };
            json!({
                "range": range(file, here, utf8),
                "severity": match d.severity {
                    Severity::Error => 1,
                    Severity::Warning => 2,
                    Severity::Info => 3,
                },
                "code": d.rule,
                "codeDescription": crate::registry::find(d.rule).map(|r| json!({ "href": r.url() })),
                "source": "txlint",
                "message": message,
                "relatedInformation": related,
            })
        })
        .collect()
}

/// LSP range: 0-based line, character in UTF-16 code units (or bytes with UTF-8).
fn range(file: &SourceFile, span: Span, utf8: bool) -> Value {
    let pos = |offset: usize| {
        let lc = file.line_col(offset);
        let character = if utf8 {
            offset - file.lines.line_start(lc.line).unwrap_or(0)
        } else {
            lc.column_utf16 - 1
        };
        json!({ "line": lc.line - 1, "character": character })
    };
    json!({ "start": pos(span.start()), "end": pos(span.end().max(span.start())) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris() {
        assert_eq!(
            path_of("file:///a%20b/c.sql"),
            Some(PathBuf::from("/a b/c.sql"))
        );
        assert_eq!(path_of("untitled:1"), None);
    }
}
