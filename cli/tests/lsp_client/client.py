"""A real LSP client (pygls + lsprotocol) talking to `aisc lsp` over stdio.

Usage: client.py AISC FILE. Opens FILE, then checks diagnostics (on open and
after a change that misspells a variable), hover, completion, signature help,
rename and the quick fix, all through pygls's typed requests. Prints one JSON
object with what it saw; exits 1 when a check fails, with the reason.
"""

import asyncio
import json
import pathlib
import sys

from lsprotocol import types as t
from pygls.lsp.client import LanguageClient


def position_of(text, needle, shift=0):
    at = text.index(needle) + shift
    line = text.count("\n", 0, at)
    return t.Position(line=line, character=at - (text.rfind("\n", 0, at) + 1))


async def main(aisc, path):
    text = pathlib.Path(path).read_text()
    uri = pathlib.Path(path).resolve().as_uri()
    client = LanguageClient("ais-test-client", "1")
    published = asyncio.Queue()

    @client.feature(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: t.PublishDiagnosticsParams):
        published.put_nowait(params)

    await client.start_io(aisc, "lsp")
    init = await client.initialize_async(
        t.InitializeParams(capabilities=t.ClientCapabilities(), process_id=None, root_uri=None)
    )
    client.initialized(t.InitializedParams())
    caps = init.capabilities
    seen = {
        "server": init.server_info.name if init.server_info else None,
        "rename_provider": caps.rename_provider is not None,
        "signature_help_provider": caps.signature_help_provider is not None,
    }

    async def diagnostics():
        p = await asyncio.wait_for(published.get(), 60)
        assert p.uri == uri, p.uri
        return p.diagnostics

    doc = t.TextDocumentIdentifier(uri=uri)
    client.text_document_did_open(
        t.DidOpenTextDocumentParams(
            text_document=t.TextDocumentItem(uri=uri, language_id="ais", version=1, text=text)
        )
    )
    seen["diagnostics_on_open"] = [d.code for d in await diagnostics()]

    hover = await client.text_document_hover_async(
        t.HoverParams(text_document=doc, position=position_of(text, "questions, facts", 1))
    )
    seen["hover"] = hover.contents.value if hover else None

    completion = await client.text_document_completion_async(
        t.CompletionParams(text_document=doc, position=position_of(text, "think(", 6))
    )
    items = completion.items if isinstance(completion, t.CompletionList) else completion
    seen["completion"] = sorted({i.label for i in items})

    sig = await client.text_document_signature_help_async(
        t.SignatureHelpParams(text_document=doc, position=position_of(text, "facts)", 2))
    )
    seen["signature"] = sig.signatures[0].label if sig else None
    seen["active_parameter"] = sig.active_parameter if sig else None

    rename = await client.text_document_rename_async(
        t.RenameParams(
            text_document=doc, position=position_of(text, "facts =", 1), new_name="evidence"
        )
    )
    edits = rename.changes[uri] if rename and rename.changes else []
    seen["rename_edits"] = sorted(
        (e.range.start.line, e.range.start.character, e.new_text) for e in edits
    )

    broken = text.replace("questions, facts)", "questions, fact)")
    client.text_document_did_change(
        t.DidChangeTextDocumentParams(
            text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[t.TextDocumentContentChangeWholeDocument(text=broken)],
        )
    )
    diags = await diagnostics()
    seen["diagnostics_after_change"] = sorted(d.code for d in diags)
    undefined = [d for d in diags if d.code == "E0100"]
    actions = await client.text_document_code_action_async(
        t.CodeActionParams(
            text_document=doc,
            range=undefined[0].range,
            context=t.CodeActionContext(diagnostics=undefined),
        )
    ) if undefined else []
    seen["code_actions"] = [a.title for a in actions or []]

    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    print(json.dumps(seen, sort_keys=True))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
