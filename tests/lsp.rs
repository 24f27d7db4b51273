//! The language server over an in-memory connection: initialize, open a document, get its
//! diagnostics at the right UTF-16 positions, change it, shut down.

use std::time::Duration;

use lsp_server::{Connection, Message, Notification, Request, RequestId};
use serde_json::{Value, json};

fn next_diagnostics(client: &Connection) -> Value {
    loop {
        match client
            .receiver
            .recv_timeout(Duration::from_secs(20))
            .expect("a message from the server")
        {
            Message::Notification(n) if n.method == "textDocument/publishDiagnostics" => {
                return n.params;
            }
            _ => continue,
        }
    }
}

/// One message as the base protocol frames it.
fn frame(v: &Value) -> Vec<u8> {
    let b = v.to_string();
    format!("Content-Length: {}\r\n\r\n{b}", b.len()).into_bytes()
}

/// `txlint lsp` as a process fed `input` on stdin (then closed): what it printed, how it ended.
fn server_process(input: &[u8]) -> std::process::Output {
    use std::io::Write;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_txlint"))
        .arg("lsp")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("txlint lsp");
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// The messages a server process wrote, read back.
fn replies(stdout: &[u8]) -> Vec<Message> {
    let mut reader = std::io::BufReader::new(stdout);
    let mut out = Vec::new();
    while let Ok(Some(Ok(m))) = txlint::lsp::read_message(&mut reader) {
        out.push(m);
    }
    out
}

/// The server's answer to request `id` among `replies`.
fn answer(replies: &[Message], id: i32) -> Option<lsp_server::Response> {
    replies.iter().find_map(|m| match m {
        Message::Response(r) if r.id == RequestId::from(id) => Some(r.clone()),
        _ => None,
    })
}

#[test]
fn publishes_diagnostics_for_open_documents() {
    let (server, client) = Connection::memory();
    let cwd = std::env::temp_dir();
    let handle = std::thread::spawn(move || txlint::lsp::serve(&server, &cwd));

    client
        .sender
        .send(
            Request::new(
                RequestId::from(1),
                "initialize".into(),
                json!({ "capabilities": {} }),
            )
            .into(),
        )
        .unwrap();
    let init = client
        .receiver
        .recv_timeout(Duration::from_secs(20))
        .unwrap();
    let Message::Response(init) = init else {
        panic!("expected the initialize response, got {init:?}")
    };
    let caps = init.response_result.expect("initialize result");
    assert_eq!(caps["capabilities"]["positionEncoding"], "utf-16");
    client
        .sender
        .send(Notification::new("initialized".into(), json!({})).into())
        .unwrap();

    // `é` is two bytes but one UTF-16 unit: the call starts at character 12 of line 1.
    let uri = "untitled:Untitled-1";
    let text =
        "BEGIN;\nSELECT 'é', pg_advisory_lock(1);\nCOMMIT;\nSELECT pg_advisory_xact_lock(1);\n";
    client
        .sender
        .send(Notification::new(
            "textDocument/didOpen".into(),
            json!({ "textDocument": { "uri": uri, "languageId": "sql", "version": 1, "text": text } }),
        ).into())
        .unwrap();
    let d = next_diagnostics(&client);
    assert_eq!(d["uri"], uri);
    let list = d["diagnostics"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{list:#?}");
    assert_eq!(list[0]["code"], "xact-lock-outside-transaction");
    assert_eq!(list[0]["severity"], 1);
    assert_eq!(
        list[0]["range"]["start"],
        json!({ "line": 3, "character": 7 })
    );
    assert_eq!(
        list[0]["range"]["end"],
        json!({ "line": 3, "character": 31 })
    );

    // Fixing the document clears the finding.
    client
        .sender
        .send(Notification::new(
            "textDocument/didChange".into(),
            json!({ "textDocument": { "uri": uri, "version": 2 }, "contentChanges": [{ "text": "BEGIN;\nSELECT pg_advisory_xact_lock(1);\nCOMMIT;\n" }] }),
        ).into())
        .unwrap();
    let d = next_diagnostics(&client);
    assert_eq!(d["diagnostics"].as_array().unwrap().len(), 0);

    client
        .sender
        .send(Request::new(RequestId::from(2), "shutdown".into(), json!(null)).into())
        .unwrap();
    client
        .sender
        .send(Notification::new("exit".into(), json!(null)).into())
        .unwrap();
    assert_eq!(handle.join().unwrap(), Ok(()));
}

/// The real server process on stdio: malformed input (a bad Content-Length, a body that is not
/// JSON, a line that is not a header, JSON that is not a message) is skipped or answered, and the
/// next request still gets its answer.
#[test]
fn survives_malformed_messages() {
    let mut input = Vec::new();
    input.extend(b"Content-Length: banana\r\n\r\n");
    input.extend(b"Content-Length: 5\r\n\r\n{oops");
    input.extend(b"\r\nnot a header\r\n");
    input.extend(b"Content-Length: 999999999999\r\n\r\n");
    input.extend(frame(&json!({"jsonrpc": "2.0", "id": 7, "params": 5})));
    input.extend(frame(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}),
    ));
    input.extend(frame(
        &json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}),
    ));
    input.extend(frame(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}),
    ));
    input.extend(frame(&json!({"jsonrpc": "2.0", "method": "exit"})));
    let out = server_process(&input);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let replies = replies(&out.stdout);
    let answered = |id: i32| answer(&replies, id);
    let bad = answered(7).unwrap_or_else(|| panic!("no answer to the bad request: {stdout}"));
    assert_eq!(bad.response_result.expect_err("an error").code, -32600);
    assert!(
        answered(1).is_some_and(|r| r.response_result.is_ok()),
        "{stdout}"
    );
    assert!(answered(2).is_some(), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    for why in [
        "bad Content-Length",
        "malformed header",
        "larger than",
        "not a JSON-RPC message",
    ] {
        assert!(
            stderr.contains(why),
            "stderr does not say `{why}`: {stderr}"
        );
    }
    assert!(out.status.success(), "{stderr}");
}

/// A server for the folder `dir`, initialized.
fn serve_in(dir: &std::path::Path) -> (Connection, std::thread::JoinHandle<Result<(), String>>) {
    let (server, client) = Connection::memory();
    let cwd = dir.to_path_buf();
    let handle = std::thread::spawn(move || txlint::lsp::serve(&server, &cwd));
    client
        .sender
        .send(
            Request::new(
                RequestId::from(1),
                "initialize".into(),
                json!({ "capabilities": {} }),
            )
            .into(),
        )
        .unwrap();
    let _ = client.receiver.recv_timeout(Duration::from_secs(20));
    client
        .sender
        .send(Notification::new("initialized".into(), json!({})).into())
        .unwrap();
    (client, handle)
}

/// Open `dir/name` (written to disk too) and wait for its diagnostics.
fn open(
    client: &Connection,
    dir: &std::path::Path,
    name: &str,
    language: &str,
    text: &str,
) -> Vec<Value> {
    let uri = format!("file://{}", dir.join(name).display());
    std::fs::write(dir.join(name), text).unwrap();
    client
        .sender
        .send(Notification::new(
            "textDocument/didOpen".into(),
            json!({ "textDocument": { "uri": uri, "languageId": language, "version": 1, "text": text } }),
        ).into())
        .unwrap();
    let d = next_diagnostics(client);
    assert_eq!(d["uri"], uri);
    d["diagnostics"].as_array().unwrap().clone()
}

fn stop(client: Connection, handle: std::thread::JoinHandle<Result<(), String>>) {
    client
        .sender
        .send(Request::new(RequestId::from(2), "shutdown".into(), json!(null)).into())
        .unwrap();
    client
        .sender
        .send(Notification::new("exit".into(), json!(null)).into())
        .unwrap();
    assert_eq!(handle.join().unwrap(), Ok(()));
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("txlint-lsp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Only the documents a run would read get diagnostics: not Markdown or TOML, not a file the
/// configuration excludes; a `.sql` file beside them does.
#[test]
fn lints_only_sql_and_rust_files_the_configuration_includes() {
    let dir = scratch("select");
    std::fs::create_dir_all(dir.join("vendor")).unwrap();
    std::fs::write(dir.join("txlint.toml"), "exclude = [\"vendor\"]\n").unwrap();
    let (client, handle) = serve_in(&dir);
    let bad = "SELECT pg_advisory_xact_lock(1);\n";
    assert_eq!(open(&client, &dir, "README.md", "markdown", bad).len(), 0);
    assert_eq!(open(&client, &dir, "Cargo.toml", "toml", bad).len(), 0);
    assert_eq!(open(&client, &dir, "vendor/q.sql", "sql", bad).len(), 0);
    assert_eq!(open(&client, &dir, "q.sql", "sql", bad).len(), 1);
    stop(client, handle);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The rest of the workspace is context for the open document: a lock cycle with a file on
/// disk is reported on the document, with the other side as related information; a finding
/// only in the other file is not.
#[test]
fn the_workspace_is_context_for_the_open_document() {
    let dir = scratch("context");
    std::fs::write(dir.join("txlint.toml"), "").unwrap();
    std::fs::write(
        dir.join("b.sql"),
        "BEGIN;\nUPDATE ledger SET n = 2 WHERE id = 1;\nUPDATE accounts SET n = 2 WHERE id = 1;\nCOMMIT;\nSELECT pg_advisory_xact_lock(1);\n",
    )
    .unwrap();
    let (client, handle) = serve_in(&dir);
    let a = "BEGIN;\nUPDATE accounts SET n = 1 WHERE id = 1;\nUPDATE ledger SET n = 1 WHERE id = 1;\nCOMMIT;\n";
    let found = open(&client, &dir, "a.sql", "sql", a);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0]["code"], "lock-order-inversion");
    let related = found[0]["relatedInformation"].as_array().unwrap();
    let b_uri = format!("file://{}", dir.join("b.sql").display());
    assert!(
        related.iter().any(|r| r["location"]["uri"] == b_uri),
        "{related:#?}"
    );
    stop(client, handle);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `exit` without `shutdown` ends the process with status 1; after `shutdown`, with 0.
#[test]
fn exit_status_follows_the_protocol() {
    for (shutdown, status) in [(false, 1), (true, 0)] {
        let mut input = frame(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}),
        );
        input.extend(frame(
            &json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}),
        ));
        if shutdown {
            input.extend(frame(
                &json!({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}),
            ));
        }
        input.extend(frame(&json!({"jsonrpc": "2.0", "method": "exit"})));
        let out = server_process(&input);
        assert_eq!(
            out.status.code(),
            Some(status),
            "shutdown first: {shutdown}"
        );
    }
}

/// The quick fixes insert suppression comments that txlint honours: applied, the finding goes.
#[test]
fn code_actions_suppress_on_the_line_or_in_the_file() {
    let dir = scratch("actions");
    let (client, handle) = serve_in(&dir);
    let text = "SELECT 1;\n  SELECT pg_advisory_xact_lock(1);\n";
    let found = open(&client, &dir, "q.sql", "sql", text);
    assert_eq!(found.len(), 1);
    let uri = format!("file://{}", dir.join("q.sql").display());
    client
        .sender
        .send(
            Request::new(
                RequestId::from(7),
                "textDocument/codeAction".into(),
                json!({ "textDocument": { "uri": uri }, "range": found[0]["range"], "context": { "diagnostics": found } }),
            )
            .into(),
        )
        .unwrap();
    let actions = loop {
        match client
            .receiver
            .recv_timeout(Duration::from_secs(20))
            .unwrap()
        {
            Message::Response(r) if r.id == RequestId::from(7) => break r.response_result.unwrap(),
            _ => continue,
        }
    };
    let actions = actions.as_array().unwrap();
    let titles: Vec<&str> = actions
        .iter()
        .map(|a| a["title"].as_str().unwrap())
        .collect();
    assert_eq!(
        titles,
        [
            "Suppress xact-lock-outside-transaction on this line",
            "Suppress xact-lock-outside-transaction in this file"
        ]
    );
    for (i, action) in actions.iter().enumerate() {
        let edit = &action["edit"]["changes"][&uri][0];
        let at = edit["range"]["start"]["line"].as_u64().unwrap() as usize;
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        lines.insert(
            at,
            edit["newText"]
                .as_str()
                .unwrap()
                .trim_end_matches('\n')
                .to_string(),
        );
        let fixed = lines.join("\n") + "\n";
        if i == 0 {
            assert_eq!(
                fixed,
                "SELECT 1;\n  -- txlint: ignore xact-lock-outside-transaction\n  SELECT pg_advisory_xact_lock(1);\n"
            );
        }
        client
            .sender
            .send(Notification::new(
                "textDocument/didChange".into(),
                json!({ "textDocument": { "uri": uri, "version": 2 + i }, "contentChanges": [{ "text": fixed }] }),
            ).into())
            .unwrap();
        let d = next_diagnostics(&client);
        assert_eq!(
            d["diagnostics"].as_array().unwrap().len(),
            0,
            "{}: {d}",
            titles[i]
        );
    }
    stop(client, handle);
    let _ = std::fs::remove_dir_all(&dir);
}

fn request(client: &Connection, id: i32, method: &str, params: Value) -> Value {
    client
        .sender
        .send(Request::new(RequestId::from(id), method.into(), params).into())
        .unwrap();
    loop {
        match client
            .receiver
            .recv_timeout(Duration::from_secs(20))
            .expect("an answer")
        {
            Message::Response(r) if r.id == RequestId::from(id) => {
                return r.response_result.expect("a result");
            }
            _ => continue,
        }
    }
}

fn notify(client: &Connection, method: &str, params: Value) {
    client
        .sender
        .send(Notification::new(method.into(), params).into())
        .unwrap();
}

/// Ranged changes are applied in order at UTF-16 positions: `é` is two bytes, one unit, so a
/// change read as bytes would land one character early and name no lock function.
#[test]
fn incremental_changes_apply_at_utf16_positions() {
    let dir = scratch("incremental");
    let (client, handle) = serve_in(&dir);
    let uri = format!("file://{}", dir.join("q.sql").display());
    assert_eq!(
        open(&client, &dir, "q.sql", "sql", "SELECT 'é', abs(1);\n").len(),
        0
    );
    let at = |line: u32, a: u32, b: u32| json!({ "start": { "line": line, "character": a }, "end": { "line": line, "character": b } });
    notify(
        &client,
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": 2 },
                "contentChanges": [{ "range": at(0, 12, 15), "text": "pg_advisory_xact_lock" }] }),
    );
    let found = next_diagnostics(&client)["diagnostics"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0]["code"], "xact-lock-outside-transaction");
    assert_eq!(
        found[0]["range"]["start"],
        json!({ "line": 0, "character": 12 })
    );
    // Two changes in one notification, the second at a position only the first creates.
    notify(
        &client,
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": 3 },
                "contentChanges": [
                    { "range": at(0, 0, 0), "text": "BEGIN;\n" },
                    { "range": at(2, 0, 0), "text": "COMMIT;\n" },
                ] }),
    );
    let found = next_diagnostics(&client)["diagnostics"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(found.len(), 0, "inside BEGIN .. COMMIT now: {found:#?}");
    stop(client, handle);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every finding links its rule's page; hover on it shows the rule's summary and the link,
/// hover elsewhere shows nothing.
#[test]
fn hover_and_code_description_link_the_rule_page() {
    let dir = scratch("hover");
    let (client, handle) = serve_in(&dir);
    let uri = format!("file://{}", dir.join("q.sql").display());
    let found = open(
        &client,
        &dir,
        "q.sql",
        "sql",
        "SELECT 1;\nSELECT pg_advisory_xact_lock(1);\n",
    );
    assert_eq!(found.len(), 1);
    let rule = txlint::registry::find("xact-lock-outside-transaction").unwrap();
    assert_eq!(found[0]["codeDescription"]["href"], rule.url());
    let on = request(
        &client,
        5,
        "textDocument/hover",
        json!({ "textDocument": { "uri": uri }, "position": { "line": 1, "character": 10 } }),
    );
    let text = on["contents"]["value"].as_str().unwrap();
    assert!(text.contains("xact-lock-outside-transaction"), "{text}");
    assert!(
        text.contains(&rule.summary()) && text.contains(&rule.url()),
        "{text}"
    );
    let off = request(
        &client,
        6,
        "textDocument/hover",
        json!({ "textDocument": { "uri": uri }, "position": { "line": 0, "character": 3 } }),
    );
    assert_eq!(off, Value::Null);
    stop(client, handle);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A client that can watch files is asked to; a changed `txlint.toml` lints the open
/// documents again with it.
#[test]
fn a_changed_configuration_lints_open_documents_again() {
    let dir = scratch("watch");
    let (server, client) = Connection::memory();
    let cwd = dir.clone();
    let handle = std::thread::spawn(move || txlint::lsp::serve(&server, &cwd));
    let caps = json!({ "capabilities": { "workspace": { "didChangeWatchedFiles": { "dynamicRegistration": true } } } });
    request(&client, 1, "initialize", caps);
    notify(&client, "initialized", json!({}));
    let registration = loop {
        match client
            .receiver
            .recv_timeout(Duration::from_secs(20))
            .unwrap()
        {
            Message::Request(r) if r.method == "client/registerCapability" => break r,
            _ => continue,
        }
    };
    let reg = &registration.params["registrations"][0];
    assert_eq!(reg["method"], "workspace/didChangeWatchedFiles");
    let globs: Vec<&str> = reg["registerOptions"]["watchers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["globPattern"].as_str().unwrap())
        .collect();
    assert!(globs.contains(&"**/txlint.toml"), "{globs:?}");
    let found = open(
        &client,
        &dir,
        "q.sql",
        "sql",
        "SELECT pg_advisory_xact_lock(1);\n",
    );
    assert_eq!(found.len(), 1);
    std::fs::write(
        dir.join("txlint.toml"),
        "[rules]\nxact-lock-outside-transaction = \"off\"\n",
    )
    .unwrap();
    let toml = format!("file://{}", dir.join("txlint.toml").display());
    notify(
        &client,
        "workspace/didChangeWatchedFiles",
        json!({ "changes": [{ "uri": toml, "type": 1 }] }),
    );
    let again = next_diagnostics(&client);
    assert_eq!(
        again["diagnostics"].as_array().unwrap().len(),
        0,
        "{again:#?}"
    );
    stop(client, handle);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A save with text for a document the client never opened is neither kept nor published: the
/// next diagnostics are those of the document opened after it.
#[test]
fn a_save_of_a_document_never_opened_is_ignored() {
    let dir = scratch("save-unopened");
    let (client, handle) = serve_in(&dir);
    let bad = "SELECT pg_advisory_xact_lock(1);\n";
    let never = format!("file://{}", dir.join("never.sql").display());
    notify(
        &client,
        "textDocument/didSave",
        json!({ "textDocument": { "uri": never }, "text": bad }),
    );
    assert_eq!(open(&client, &dir, "q.sql", "sql", bad).len(), 1);
    stop(client, handle);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Before `initialize` a request is answered "not initialized" and a response is dropped;
/// between `initialize` and `initialized` requests are served: the session goes on.
#[test]
fn the_handshake_tolerates_what_clients_send_out_of_turn() {
    let dir = scratch("handshake");
    let uri = format!("file://{}", dir.join("q.sql").display());
    let mut input = frame(&json!({"jsonrpc": "2.0", "id": 5, "method": "textDocument/hover"}));
    input.extend(frame(&json!({"jsonrpc": "2.0", "id": 9, "result": null})));
    input.extend(frame(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}),
    ));
    input.extend(frame(
        &json!({"jsonrpc": "2.0", "id": 6, "method": "textDocument/hover",
        "params": {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}}),
    ));
    input.extend(frame(
        &json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}),
    ));
    input.extend(frame(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}),
    ));
    input.extend(frame(&json!({"jsonrpc": "2.0", "method": "exit"})));
    let out = server_process(&input);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let replies = replies(&out.stdout);
    let answer = |id: i32| answer(&replies, id);
    let early = answer(5).expect("an answer to the request before initialize");
    assert_eq!(early.response_result.expect_err("an error").code, -32002);
    assert!(answer(1).is_some_and(|r| r.response_result.is_ok()));
    assert!(answer(6).is_some_and(|r| r.response_result.is_ok()));
    assert!(answer(2).is_some_and(|r| r.response_result.is_ok()));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A client that stops reading does not keep the server from exiting after `exit`: the writer
/// blocked on a full pipe is left behind.
#[test]
fn a_client_that_stops_reading_still_sees_the_server_exit() {
    use std::io::Write;
    let dir = scratch("no-reader");
    let uri = format!("file://{}", dir.join("q.sql").display());
    // Each version has hundreds of findings: far more than a pipe holds.
    let text = |v: usize| "SELECT pg_advisory_xact_lock(1);\n".repeat(500 + v);
    let mut input = frame(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}),
    );
    input.extend(frame(
        &json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}),
    ));
    input.extend(frame(
        &json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
        "textDocument": {"uri": uri, "languageId": "sql", "version": 1, "text": text(0)}}}),
    ));
    for v in 1..40 {
        input.extend(frame(
            &json!({"jsonrpc": "2.0", "method": "textDocument/didChange",
            "params": {"textDocument": {"uri": uri, "version": v + 1},
                "contentChanges": [{"text": text(v)}]}}),
        ));
    }
    input.extend(frame(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}),
    ));
    input.extend(frame(&json!({"jsonrpc": "2.0", "method": "exit"})));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_txlint"))
        .arg("lsp")
        .current_dir(&dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("txlint lsp");
    // Never read: the pipe fills and the server's writer blocks.
    let _stdout = child.stdout.take();
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(&input).expect("the server reads its input");
    drop(stdin);
    // A bound on waiting, not a timing: a server that hangs fails here instead of hanging CI.
    let mut status = None;
    for _ in 0..1200 {
        status = child.try_wait().expect("wait");
        if status.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if status.is_none() {
        let _ = child.kill();
    }
    assert!(
        status.is_some_and(|s| s.success()),
        "the server did not exit: {status:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
