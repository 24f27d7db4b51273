//! The language server driven by a real LSP client library (pygls, from PyPI, installed into
//! the tests' virtualenv): UTF-16 positions, documents txlint does not read, an excluded file,
//! code actions, ten quick edits, and a clean exit while the client still holds stdin open.
//! The checks are in `tests/lsp_client/client.py`.

mod common;

#[test]
fn a_real_client_sees_what_an_editor_needs() {
    let bin = common::python_tools(&["pygls"]);
    let dir = std::env::temp_dir().join(format!("txlint-lsp-client-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = std::process::Command::new(bin.join("python"))
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/lsp_client/client.py"
        ))
        .arg(env!("CARGO_BIN_EXE_txlint"))
        .arg(&dir)
        .output()
        .expect("python");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    for step in [
        "positions and selection: ok",
        "code actions: ok",
        "rapid edits: ok",
    ] {
        assert!(err.contains(step), "{step} missing: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
