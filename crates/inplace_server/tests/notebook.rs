//! LSP 3.17 notebook synchronisation: a notebook's code cells analysed together, diagnostics
//! per cell, edits to cells and to the cell list, code actions and hover in cells.

mod common;

use common::{apply_edits, Client};
use serde_json::{json, Value};

const NB: &str = "file:///work/train.ipynb";

fn cell_uri(i: usize) -> String {
    format!("vscode-notebook-cell:/work/train.ipynb#c{i}")
}

async fn start() -> Client {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let (sr, sw) = tokio::io::split(server_io);
    tokio::spawn(inplace_server::serve(sr, sw));
    let (cr, cw) = tokio::io::split(client_io);
    Client::new(cr, cw)
}

/// Cells 0..: (kind, text); kind 1 = markup, 2 = code.
fn open_params(cells: &[(u8, &str)]) -> Value {
    json!({
        "notebookDocument": {
            "uri": NB, "notebookType": "jupyter-notebook", "version": 1,
            "cells": cells.iter().enumerate().map(|(i, (k, _))| json!({"kind": k, "document": cell_uri(i)})).collect::<Vec<_>>(),
        },
        "cellTextDocuments": cells.iter().enumerate().map(|(i, (k, t))| json!({
            "uri": cell_uri(i), "languageId": if *k == 2 { "python" } else { "markdown" }, "version": 1, "text": t,
        })).collect::<Vec<_>>(),
    })
}

const CELLS: [(u8, &str); 5] = [
    (2, "%matplotlib inline\nimport torch\n"),
    (
        2,
        "x = torch.randn(3, requires_grad=True)\nh = torch.sigmoid(x)\n",
    ),
    (1, "Scale in place:"),
    (2, "!nvidia-smi\nh *= 2\n"),
    (2, "h.sum().backward()"),
];

/// Publishes until every code cell has had one after the change; the last per cell.
async fn cell_diagnostics(c: &mut Client, cells: &[usize]) -> Vec<(String, Vec<Value>)> {
    let mut seen: Vec<(String, Vec<Value>)> = Vec::new();
    while cells
        .iter()
        .any(|i| !seen.iter().any(|(u, _)| *u == cell_uri(*i)))
    {
        let p = c.wait_for("textDocument/publishDiagnostics").await;
        let uri = p["uri"].as_str().unwrap().to_string();
        assert_ne!(uri, NB, "diagnostics go to cells, not to the notebook");
        let diags = p["diagnostics"].as_array().unwrap().clone();
        seen.retain(|(u, _)| *u != uri);
        seen.push((uri, diags));
    }
    seen
}

/// Cell 1's `torch.sigmoid` edited into `torch.sin` (whose output is not saved). The
/// notebook's version stays 1, as VS Code sends a cell's text edit.
async fn sigmoid_to_sin(c: &mut Client) {
    c.notify(
        "notebookDocument/didChange",
        json!({"notebookDocument": {"uri": NB, "version": 1}, "change": {"cells": {"textContent": [{
            "document": {"uri": cell_uri(1), "version": 2},
            "changes": [{"range": {"start": {"line": 1, "character": 10}, "end": {"line": 1, "character": 17}}, "text": "sin"}],
        }]}}}),
    )
    .await;
}

fn of(seen: &[(String, Vec<Value>)], i: usize) -> &[Value] {
    &seen.iter().find(|(u, _)| *u == cell_uri(i)).unwrap().1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hazard_across_cells_is_reported_on_its_cell() {
    let mut c = start().await;
    let init = c
        .initialize(
            json!({"textDocument": {"publishDiagnostics": {"relatedInformation": true}}}),
            json!(null),
        )
        .await;
    let sync = &init["capabilities"]["notebookDocumentSync"];
    assert_eq!(sync["notebookSelector"][0]["notebook"], "jupyter-notebook");
    // Every cell is synced: markdown cells count in the numbers messages use.
    assert!(sync["notebookSelector"][0]["cells"].is_null(), "{sync}");
    c.notify("notebookDocument/didOpen", open_params(&CELLS))
        .await;
    let seen = cell_diagnostics(&mut c, &[0, 1, 3, 4]).await;
    assert!(of(&seen, 0).is_empty() && of(&seen, 1).is_empty() && of(&seen, 4).is_empty());
    let d = &of(&seen, 3)[0];
    assert_eq!(d["code"], "IP301");
    assert_eq!(
        d["range"],
        json!({"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 6}})
    );
    let msg = d["message"].as_str().unwrap();
    assert!(msg.contains("(cell 2, line 2)"), "{msg}");
    assert!(msg.contains("(cell 5, line 1)"), "{msg}");
    let related = d["relatedInformation"].as_array().unwrap();
    assert!(related.iter().any(|r| r["location"]["uri"] == cell_uri(1)
        && r["location"]["range"]["start"] == json!({"line": 1, "character": 4})));
    assert!(related.iter().any(|r| r["location"]["uri"] == cell_uri(4)));

    // The quick fix edits the cell.
    let actions = c
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": cell_uri(3)}, "range": d["range"], "context": {"diagnostics": [d]}}),
        )
        .await;
    let fix = &actions[0];
    assert_eq!(fix["kind"], "quickfix");
    let edits = fix["edit"]["changes"][cell_uri(3)].as_array().unwrap();
    assert_eq!(apply_edits(CELLS[3].1, edits), "!nvidia-smi\nh = h * 2\n");
    let noqa = actions
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["title"].as_str().unwrap().starts_with("Suppress"))
        .unwrap();
    let suppressed = apply_edits(
        CELLS[3].1,
        noqa["edit"]["changes"][cell_uri(3)].as_array().unwrap(),
    );
    assert_eq!(suppressed, "!nvidia-smi\nh *= 2  # noqa: IP301\n");

    // Hover in the cell quotes the runtime error and where it raises.
    let hover = c
        .request(
            "textDocument/hover",
            json!({"textDocument": {"uri": cell_uri(3)}, "position": {"line": 1, "character": 2}}),
        )
        .await;
    let md = hover["contents"]["value"].as_str().unwrap();
    assert!(md.contains("(raised at cell 5, line 1)"), "{md}");
    assert_eq!(hover["range"], d["range"]);

    // Fix-all asked on a cell rewrites the cells that change.
    let all = c
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": cell_uri(3)}, "range": d["range"],
                   "context": {"diagnostics": [], "only": ["source.fixAll.inplace-lsp"]}}),
        )
        .await;
    let changes = all[0]["edit"]["changes"].as_object().unwrap();
    assert_eq!(changes.len(), 1);
    assert_eq!(
        apply_edits(CELLS[3].1, changes[&cell_uri(3)].as_array().unwrap()),
        "!nvidia-smi\nh = h * 2\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_to_cells_and_to_the_cell_list_update_the_later_cells() {
    let mut c = start().await;
    c.initialize(json!({}), json!(null)).await;
    c.notify("notebookDocument/didOpen", open_params(&CELLS))
        .await;
    let seen = cell_diagnostics(&mut c, &[0, 1, 3, 4]).await;
    assert_eq!(of(&seen, 3).len(), 1);

    // An edit in cell 1 (`sigmoid` -> `add`: nothing saved) clears the finding in cell 3.
    sigmoid_to_sin(&mut c).await;
    let seen = cell_diagnostics(&mut c, &[0, 1, 3, 4]).await;
    assert!(seen.iter().all(|(_, d)| d.is_empty()), "{seen:?}");

    // A new code cell between 2 and 3 that saves `h` again (`h = h.exp()`): the write in the
    // old cell 3 (now the fifth) is a hazard again, its message numbering the new cells.
    c.notify(
        "notebookDocument/didChange",
        json!({"notebookDocument": {"uri": NB, "version": 3}, "change": {"cells": {"structure": {
            "array": {"start": 3, "deleteCount": 0, "cells": [{"kind": 2, "document": cell_uri(9)}]},
            "didOpen": [{"uri": cell_uri(9), "languageId": "python", "version": 1, "text": "h = h.exp()\n"}],
        }}}}),
    )
    .await;
    let seen = cell_diagnostics(&mut c, &[0, 1, 9, 3, 4]).await;
    let d = &of(&seen, 3)[0];
    assert_eq!(d["code"], "IP301");
    assert!(
        d["message"].as_str().unwrap().contains("(cell 4, line 1)"),
        "{d}"
    );

    // Moving the write's cell before the new one (delete + insert): no hazard any more, since
    // `exp` then saves a tensor nothing writes.
    c.notify(
        "notebookDocument/didChange",
        json!({"notebookDocument": {"uri": NB, "version": 4}, "change": {"cells": {"structure": {
            "array": {"start": 3, "deleteCount": 2, "cells": [
                {"kind": 2, "document": cell_uri(3)}, {"kind": 2, "document": cell_uri(9)}]},
        }}}}),
    )
    .await;
    let seen = cell_diagnostics(&mut c, &[0, 1, 3, 9, 4]).await;
    assert!(seen.iter().all(|(_, d)| d.is_empty()), "{seen:?}");

    // Removing a cell clears its diagnostics; closing clears every cell's.
    c.notify(
        "notebookDocument/didChange",
        json!({"notebookDocument": {"uri": NB, "version": 5}, "change": {"cells": {"structure": {
            "array": {"start": 4, "deleteCount": 1},
            "didClose": [{"uri": cell_uri(9)}],
        }}}}),
    )
    .await;
    let seen = cell_diagnostics(&mut c, &[9, 0, 1, 3, 4]).await;
    assert!(of(&seen, 9).is_empty());
    c.notify(
        "notebookDocument/didClose",
        json!({"notebookDocument": {"uri": NB}, "cellTextDocuments": [
            {"uri": cell_uri(0)}, {"uri": cell_uri(1)}, {"uri": cell_uri(3)}, {"uri": cell_uri(4)}]}),
    )
    .await;
    let seen = cell_diagnostics(&mut c, &[0, 1, 3, 4]).await;
    assert!(seen.iter().all(|(_, d)| d.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_diagnostics_of_a_cell() {
    let mut c = start().await;
    c.initialize(
        json!({"textDocument": {"diagnostic": {"dynamicRegistration": false}}}),
        json!(null),
    )
    .await;
    c.notify("notebookDocument/didOpen", open_params(&CELLS))
        .await;
    for (i, n) in [(3, 1), (1, 0), (4, 0)] {
        let r = c
            .request(
                "textDocument/diagnostic",
                json!({"textDocument": {"uri": cell_uri(i)}}),
            )
            .await;
        assert_eq!(r["items"].as_array().unwrap().len(), n, "cell {i}: {r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_asks_a_pulling_client_to_pull_the_later_cells_again() {
    let mut c = start().await;
    c.initialize(
        json!({"textDocument": {"diagnostic": {"dynamicRegistration": false}},
               "workspace": {"diagnostics": {"refreshSupport": true}}}),
        json!(null),
    )
    .await;
    c.notify("notebookDocument/didOpen", open_params(&CELLS))
        .await;
    c.wait_for("workspace/diagnostic/refresh").await;
    // Editing cell 1 changes what cell 3 reports: the client is asked to pull again, and cell 3
    // then has no finding.
    sigmoid_to_sin(&mut c).await;
    c.wait_for("workspace/diagnostic/refresh").await;
    let r = c
        .request(
            "textDocument/diagnostic",
            json!({"textDocument": {"uri": cell_uri(3)}}),
        )
        .await;
    assert_eq!(r["items"], json!([]), "{r}");
}
