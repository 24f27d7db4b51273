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
