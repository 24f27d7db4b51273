"""Drive `txlint lsp` with a real LSP client library (pygls), as an editor would.

Usage: client.py TXLINT_BINARY SCRATCH_FOLDER. Exits 0 when every check holds; otherwise prints
what failed and exits 1. Run by tests/lsp_client.rs.
"""

import asyncio
import pathlib
import sys

from lsprotocol import types as t
from pygls.lsp.client import LanguageClient

BAD = "SELECT pg_advisory_xact_lock(1);\n"


async def main(binary: str, root: pathlib.Path) -> None:
    (root / "vendor").mkdir(parents=True, exist_ok=True)
    (root / "txlint.toml").write_text('exclude = ["vendor"]\n')
    client = LanguageClient("txlint-test-client", "1")
    # Each publication with its own diagnostics, in the order they arrive.
    events: asyncio.Queue[tuple[str, list[t.Diagnostic]]] = asyncio.Queue()

    @client.feature(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: t.PublishDiagnosticsParams) -> None:
        events.put_nowait((params.uri, list(params.diagnostics)))

    async def next_for(uri: str) -> list[t.Diagnostic]:
        while True:
            got, diagnostics = await asyncio.wait_for(events.get(), 30)
            if got == uri:
                return diagnostics

    await client.start_io(binary, "lsp", cwd=str(root))
    init = await client.initialize_async(
        t.InitializeParams(capabilities=t.ClientCapabilities(), root_uri=root.as_uri())
    )
    assert init.capabilities.position_encoding in (None, t.PositionEncodingKind.Utf16), init
    client.initialized(t.InitializedParams())

    async def open_doc(name: str, language: str, text: str) -> tuple[str, list[t.Diagnostic]]:
        path = root / name
        path.write_text(text)
        uri = path.as_uri()
        client.text_document_did_open(
            t.DidOpenTextDocumentParams(
                text_document=t.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)
            )
        )
        return uri, await next_for(uri)

    # UTF-16 positions: `é` is one code unit, the emoji two; the call starts at unit 14.
    uri, found = await open_doc("q.sql", "sql", "SELECT 1;\nSELECT 'é😀', pg_advisory_xact_lock(1);\n")
    assert len(found) == 1, found
    d = found[0]
    assert d.code == "xact-lock-outside-transaction", d
    assert (d.range.start.line, d.range.start.character) == (1, 14), d.range
    assert (d.range.end.line, d.range.end.character) == (1, 38), d.range

    # Documents txlint does not read: no findings.
    _, found = await open_doc("README.md", "markdown", BAD)
    assert not found, found
    _, found = await open_doc("vendor/v.sql", "sql", BAD)
    assert not found, found

    print("positions and selection: ok", file=sys.stderr)
    # Quick fixes for the finding.
    actions = await client.text_document_code_action_async(
        t.CodeActionParams(
            text_document=t.TextDocumentIdentifier(uri=uri),
            range=d.range,
            context=t.CodeActionContext(diagnostics=[d]),
        )
    )
    titles = [a.title for a in actions or []]
    assert titles == [
        "Suppress xact-lock-outside-transaction on this line",
        "Suppress xact-lock-outside-transaction in this file",
    ], titles

    print("code actions: ok", file=sys.stderr)
    # Ten quick edits: the last version is what is finally published (it has no finding, the
    # ones before have one to ten), and nothing older comes after it.
    for version in range(2, 12):
        text = BAD * (11 - version) if version < 11 else "SELECT 1;\n"
        client.text_document_did_change(
            t.DidChangeTextDocumentParams(
                text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[t.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
    while await next_for(uri):
        pass
    try:
        late = await asyncio.wait_for(next_for(uri), 1.5)
        raise AssertionError(f"a stale result came after the latest: {late}")
    except asyncio.TimeoutError:
        pass

    print("rapid edits: ok", file=sys.stderr)
    await client.shutdown_async(None)
    client.exit(None)
    # The server exits although the client still holds its stdin open.
    try:
        await asyncio.wait_for(client.stop(), 10)
    except asyncio.TimeoutError:
        raise AssertionError("the server did not exit after shutdown and exit")
    print("exit: ok", file=sys.stderr)


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1], pathlib.Path(sys.argv[2])))
    except AssertionError as e:
        print(f"check failed: {e!r}", file=sys.stderr)
        sys.exit(1)
