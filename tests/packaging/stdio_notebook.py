"""Drive `inplace-lsp server` over stdio as an editor would for a notebook.

    python stdio_notebook.py BINARY NOTEBOOK.ipynb

The handshake (initialize: server name, version, notebookDocumentSync), then the notebook's
cells sent with notebookDocument/didOpen; the hazard of tests/demo/notebook.ipynb must be
published on its 5th cell at line 2; a didChange that rewrites that line out of place must clear
it; shutdown and exit must end the process with status 0. Exits 1 with a message otherwise.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import queue


def fail(msg: str) -> None:
    print(f"stdio-notebook: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


class Server:
    def __init__(self, binary: str) -> None:
        self.proc = subprocess.Popen([binary, "server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.inbox: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 0

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            headers = {}
            while True:
                line = out.readline()
                if not line:
                    self.inbox.put(None)
                    return
                line = line.strip()
                if not line:
                    break
                k, v = line.decode().split(":", 1)
                headers[k.lower()] = v.strip()
            body = out.read(int(headers["content-length"]))
            self.inbox.put(json.loads(body))

    def send(self, msg: dict) -> None:
        data = json.dumps({"jsonrpc": "2.0", **msg}).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)
        self.proc.stdin.flush()

    def request(self, method: str, params) -> dict:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        while True:
            msg = self.next_message()
            if msg.get("id") == self.next_id and "method" not in msg:
                if "error" in msg:
                    fail(f"{method}: {msg['error']}")
                return msg["result"]

    def notify(self, method: str, params) -> None:
        self.send({"method": method, "params": params})

    def next_message(self) -> dict:
        try:
            msg = self.inbox.get(timeout=30)
        except queue.Empty:
            fail("no message from the server within 30 s")
        if msg is None:
            fail("the server closed its output")
        if "method" in msg and "id" in msg:  # a request to the client: answer it
            self.send({"id": msg["id"], "result": None})
        return msg

    def diagnostics(self, uri: str) -> list:
        while True:
            msg = self.next_message()
            if msg.get("method") == "textDocument/publishDiagnostics" and msg["params"]["uri"] == uri:
                return msg["params"]["diagnostics"]


def main() -> None:
    binary, notebook = sys.argv[1], sys.argv[2]
    cells = json.load(open(notebook, encoding="utf-8"))["cells"]
    nb_uri = "file:///work/demo.ipynb"
    uris = [f"vscode-notebook-cell:/work/demo.ipynb#cell{i}" for i in range(len(cells))]
    s = Server(binary)
    init = s.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
    if init.get("serverInfo", {}).get("name") != "inplace-lsp":
        fail(f"serverInfo: {init.get('serverInfo')}")
    sync = init["capabilities"].get("notebookDocumentSync")
    if not sync or sync["notebookSelector"][0]["notebook"] != "jupyter-notebook":
        fail(f"notebookDocumentSync: {sync}")
    s.notify("initialized", {})
    texts = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells]
    s.notify("notebookDocument/didOpen", {
        "notebookDocument": {
            "uri": nb_uri, "notebookType": "jupyter-notebook", "version": 1,
            "cells": [{"kind": 2 if c["cell_type"] == "code" else 1, "document": u} for c, u in zip(cells, uris)],
        },
        "cellTextDocuments": [
            {"uri": u, "languageId": "python" if c["cell_type"] == "code" else "markdown", "version": 1, "text": t}
            for c, u, t in zip(cells, uris, texts)
        ],
    })
    diags = s.diagnostics(uris[4])
    if [d["code"] for d in diags] != ["IP301"] or diags[0]["range"]["start"] != {"line": 1, "character": 0}:
        fail(f"cell 5 diagnostics: {diags}")
    edit = diags[0]["data"]["fix"]["changes"][uris[4]][0]
    s.notify("notebookDocument/didChange", {
        "notebookDocument": {"uri": nb_uri, "version": 2},
        "change": {"cells": {"textContent": [{
            "document": {"uri": uris[4], "version": 2},
            "changes": [{"range": edit["range"], "text": edit["newText"]}],
        }]}},
    })
    diags = s.diagnostics(uris[4])
    if diags:
        fail(f"after the fix, cell 5 still has {diags}")
    s.request("shutdown", None)
    s.notify("exit", None)
    code = s.proc.wait(timeout=10)
    if code != 0:
        fail(f"exit status {code}")
    print("stdio-notebook: ok (handshake, notebook sync, fix, clean exit)", file=sys.stderr)


if __name__ == "__main__":
    main()
