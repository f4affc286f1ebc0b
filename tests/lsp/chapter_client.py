#!/usr/bin/env python3
"""Drive `inplace-lsp server` with a real LSP client library (pygls) over stdio, on the
chapter's examples and a few more fixtures.

For every file: the diagnostics must carry exactly the ranges `inplace-lsp check
--output-format json` reports (converted to UTF-16), every offered quick fix must produce its
expected text and make its finding disappear, and hover on a form ③ finding must quote the
runtime message. Usage: chapter_client.py BINARY FILE...
"""
import asyncio
import json
import subprocess
import sys

from lsprotocol import types as t
from pygls.lsp.client import LanguageClient

FORM3 = "one of the variables needed for gradient computation has been modified by an inplace operation"
# What the preferred quick fix of each code must write.
EXPECTED_FIX = {
    "IP301": ("y = y + 1", "y = y.mul(2)", "b = b + 1", "y = y.mul(", "y2 = y2.clone()", "y = y.clone()",
              "y2.detach().clone()"),
    "IP302": ("= ",),
    "IP303": ("inplace=False",),
    "IP304": (".step()",),
    # (Arithmetic through `.data` is rewritten as itself: the gradient goes through it.)
    "IP401": (".detach()", "with torch.no_grad():", "y2 = y2.mul(0)"),
    "IP402": (".clone()", "torch.relu("),
    "IP403": ("with torch.no_grad():", "torch.optim."),
    "IP101": ("with torch.no_grad():",),
    "IP201": ("with torch.no_grad():",),
    "IP501": ("set_detect_anomaly(False)", "set_anomaly_enabled(False)"),
}


def utf16_col(line: str, chars: int) -> int:
    return len(line[:chars].encode("utf-16-le")) // 2


def offset(text: str, pos: t.Position) -> int:
    lines = text.split("\n")
    start = sum(len(l) + 1 for l in lines[: pos.line])
    line = lines[pos.line] if pos.line < len(lines) else ""
    units = 0
    for i, ch in enumerate(line):
        if units >= pos.character:
            return start + i
        units += len(ch.encode("utf-16-le")) // 2
    return start + len(line)


def apply(text: str, edits) -> str:
    spans = sorted(((offset(text, e.range.start), offset(text, e.range.end), e.new_text) for e in edits), reverse=True)
    for s, e, new in spans:
        text = text[:s] + new + text[e:]
    return text


class Results:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok: bool, what: str):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(f"FAIL {what}")


async def main(binary: str, files: list[str]) -> int:
    res = Results()
    client = LanguageClient("inplace-lsp-chapter-test", "1")
    published: dict[str, tuple[int, list]] = {}
    arrived = asyncio.Event()

    @client.feature(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: t.PublishDiagnosticsParams):
        published[params.uri] = (params.version, params.diagnostics)
        arrived.set()

    async def diagnostics(uri: str, version: int):
        for _ in range(200):
            got = published.get(uri)
            if got and got[0] == version:
                return got[1]
            arrived.clear()
            try:
                await asyncio.wait_for(arrived.wait(), 0.1)
            except asyncio.TimeoutError:
                pass
        raise TimeoutError(f"no diagnostics for {uri} v{version}")

    await client.start_io(binary, "server", "--stdio")
    await client.initialize_async(t.InitializeParams(capabilities=t.ClientCapabilities(), root_uri=None))
    client.initialized(t.InitializedParams())

    for n, path in enumerate(files):
        text = open(path, encoding="utf-8").read()
        uri = f"file:///chapter/{n}.py"
        client.text_document_did_open(t.DidOpenTextDocumentParams(
            text_document=t.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
        diags = await diagnostics(uri, 1)
        cli = json.loads(subprocess.run([binary, "check", "--output-format", "json", path],
                                        capture_output=True, text=True).stdout)
        lines = text.split("\n")
        want = sorted((f["code"], f["range"]["start"]["line"] - 1,
                       utf16_col(lines[f["range"]["start"]["line"] - 1], f["range"]["start"]["column"] - 1),
                       f["range"]["end"]["line"] - 1,
                       utf16_col(lines[f["range"]["end"]["line"] - 1], f["range"]["end"]["column"] - 1)) for f in cli)
        got = sorted((d.code, d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character)
                     for d in diags)
        res.check(want == got, f"{path}: diagnostics {got} != check {want}")
        for d in diags:
            if d.code.startswith("IP3"):
                h = await client.text_document_hover_async(t.HoverParams(
                    text_document=t.TextDocumentIdentifier(uri=uri), position=d.range.start))
                res.check(h is not None and FORM3 in h.contents.value, f"{path}:{d.range.start.line + 1} hover")
            actions = await client.text_document_code_action_async(t.CodeActionParams(
                text_document=t.TextDocumentIdentifier(uri=uri), range=d.range,
                context=t.CodeActionContext(diagnostics=[d])))
            fixes = [a for a in actions or [] if a.kind == t.CodeActionKind.QuickFix and not a.title.startswith("Suppress")]
            if not fixes:
                continue
            fixed = apply(text, fixes[0].edit.changes[uri])
            expected = EXPECTED_FIX.get(d.code, ())
            res.check(any(e in fixed for e in expected), f"{path}:{d.range.start.line + 1} {d.code} fix text: {fixes[0].title}")
            version = 2
            client.text_document_did_change(t.DidChangeTextDocumentParams(
                text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[t.TextDocumentContentChangeWholeDocument(text=fixed)]))
            after = await diagnostics(uri, version)
            res.check(all(not (a.code == d.code and a.message == d.message) for a in after),
                      f"{path}:{d.range.start.line + 1} {d.code} still reported after its fix")
            # Back to the original text for the next diagnostic.
            client.text_document_did_close(t.DidCloseTextDocumentParams(text_document=t.TextDocumentIdentifier(uri=uri)))
            client.text_document_did_open(t.DidOpenTextDocumentParams(
                text_document=t.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
            published.pop(uri, None)
            await diagnostics(uri, 1)
        client.text_document_did_close(t.DidCloseTextDocumentParams(text_document=t.TextDocumentIdentifier(uri=uri)))

    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    print(f"chapter-lsp: {res.passed} passed, {res.failed} failed")
    return 1 if res.failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2:])))
