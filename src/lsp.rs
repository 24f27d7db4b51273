//! `txlint lsp`: diagnostics in the editor over the Language Server Protocol (stdio).
//!
//! Synchronous and ordered (lsp-server, as ruff and squawk use): every open, change and save of
//! a `.sql` or `.rs` document lints that document's current text with the configuration found
//! from its folder, and publishes the findings. Positions are UTF-16 code units unless the
//! client offers UTF-8.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use lsp_server::{Connection, Message, Notification, Response};
use serde_json::{Value, json};

use crate::config::Config;
use crate::diagnostic::Severity;
use crate::source::{SourceFile, Span};

/// Serve until the client shuts down.
pub fn serve(connection: &Connection, cwd: &Path) -> Result<(), String> {
    let (id, params) = connection.initialize_start().map_err(|e| e.to_string())?;
    let utf8 = params["capabilities"]["general"]["positionEncodings"]
        .as_array()
        .is_some_and(|encodings| encodings.iter().any(|e| e == "utf-8"));
    let result = json!({
        "capabilities": {
            "positionEncoding": if utf8 { "utf-8" } else { "utf-16" },
            "textDocumentSync": { "openClose": true, "change": 1, "save": { "includeText": true } },
        },
        "serverInfo": { "name": "txlint", "version": env!("CARGO_PKG_VERSION") },
    });
    connection
        .initialize_finish(id, result)
        .map_err(|e| e.to_string())?;
    let mut docs: HashMap<String, (String, String)> = HashMap::new();
    for msg in &connection.receiver {
        match msg {
            Message::Request(req) => {
                if connection
                    .handle_shutdown(&req)
                    .map_err(|e| e.to_string())?
                {
                    return Ok(());
                }
                let resp = Response::new_err(
                    req.id,
                    lsp_server::ErrorCode::MethodNotFound as i32,
                    format!("txlint does not handle {}", req.method),
                );
                send(connection, resp.into())?;
            }
            Message::Notification(n) => {
                let Some(uri) = n.params["textDocument"]["uri"].as_str().map(str::to_string) else {
                    continue;
                };
                let text = match n.method.as_str() {
                    "textDocument/didOpen" => n.params["textDocument"]["text"]
                        .as_str()
                        .map(str::to_string),
                    // Full sync: the last change holds the whole text.
                    "textDocument/didChange" => n.params["contentChanges"]
                        .as_array()
                        .and_then(|c| c.last())
                        .and_then(|c| c["text"].as_str())
                        .map(str::to_string),
                    "textDocument/didSave" => n.params["text"].as_str().map(str::to_string),
                    "textDocument/didClose" => {
                        docs.remove(&uri);
                        send(connection, publish(&uri, Vec::new()))?;
                        continue;
                    }
                    _ => continue,
                };
                let language = n.params["textDocument"]["languageId"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                let entry = docs.entry(uri.clone()).or_insert((String::new(), language));
                if let Some(text) = text {
                    entry.0 = text;
                }
                let diagnostics = lint(&uri, &entry.0, &entry.1, cwd, utf8);
                send(connection, publish(&uri, diagnostics))?;
            }
            Message::Response(_) => {}
        }
    }
    Ok(())
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
    let folder = path.parent().filter(|p| p.is_dir()).unwrap_or(cwd);
    let config = match Config::discover(folder, None) {
        Ok(c) => c,
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
    let display = crate::display_path(&path, cwd);
    let run = crate::check_files(
        vec![SourceFile::new(path, display, text.to_string())],
        &config,
    );
    let file = &run.program.files[0];
    run.diagnostics
        .iter()
        .filter(|d| d.span.file == 0)
        .map(|d| {
            let related: Vec<Value> = d
                .labels
                .iter()
                .filter(|l| l.span.file == 0)
                .map(|l| json!({ "location": { "uri": uri, "range": range(file, l.span, utf8) }, "message": l.message }))
                .collect();
            let message = match &d.help {
                Some(h) => format!("{}\nhelp: {h}", d.message),
                None => d.message.clone(),
            };
            json!({
                "range": range(file, d.span, utf8),
                "severity": match d.severity {
                    Severity::Error => 1,
                    Severity::Warning => 2,
                    Severity::Info => 3,
                },
                "code": d.rule,
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
    json!({ "start": pos(span.start), "end": pos(span.end.max(span.start)) })
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
