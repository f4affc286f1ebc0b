//! The language server in process (an in-memory duplex) and over the real binary's stdio.

mod common;

use common::{apply_edits, Client};
use serde_json::{json, Value};

const URI: &str = "file:///work/model.py";

/// The chapter's form ③ example, with a Chinese comment and an emoji before the culprit.
const SIGMOID: &str = "import torch\n\nx = torch.tensor([1.0, 2.0], requires_grad=True)  # 叶子 🌱\ny = torch.sigmoid(x)\n注 = 1; y += 1  # 💀 就地\ny.sum().backward()\n";

async fn start() -> (Client, tokio::task::JoinHandle<bool>) {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let (sr, sw) = tokio::io::split(server_io);
    let server = tokio::spawn(inplace_server::serve(sr, sw));
    let (cr, cw) = tokio::io::split(client_io);
    (Client::new(cr, cw), server)
}

fn push_caps() -> Value {
    json!({"textDocument": {"publishDiagnostics": {"relatedInformation": true}}})
}

fn pull_caps() -> Value {
    json!({"textDocument": {"diagnostic": {"dynamicRegistration": false}}})
}

/// Stable JSON for snapshots: sorted diagnostics without the `data` blob's version.
fn tidy(mut diags: Vec<Value>) -> Value {
    diags.sort_by_key(|d| {
        (
            d["range"]["start"]["line"].as_u64(),
            d["code"].as_str().map(String::from),
        )
    });
    Value::Array(diags)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_diagnostics_with_utf16_ranges() {
    let (mut c, _) = start().await;
    let init = c.initialize(push_caps(), json!(null)).await;
    assert_eq!(init["capabilities"]["positionEncoding"], "utf-16");
    assert!(init["capabilities"]["diagnosticProvider"].is_null());
    c.open(URI, SIGMOID).await;
    let diags = c.diagnostics_for(URI, 1).await;
    assert_eq!(diags.len(), 1);
    let d = &diags[0];
    assert_eq!(d["code"], "IP301");
    assert_eq!(d["source"], "inplace-lsp");
    assert_eq!(d["severity"], 1);
    // `注 = 1; y += 1`: `y` is UTF-16 column 7 on line 4 (0-based).
    assert_eq!(
        d["range"],
        json!({"start": {"line": 4, "character": 7}, "end": {"line": 4, "character": 13}})
    );
    assert!(d["codeDescription"]["href"]
        .as_str()
        .unwrap()
        .contains("ip301_saved_output_inplace"));
    let related = d["relatedInformation"].as_array().unwrap();
    assert!(related
        .iter()
        .any(|r| r["location"]["range"]["start"]["line"] == 3));
    assert!(related
        .iter()
        .any(|r| r["location"]["range"]["start"]["line"] == 5));
    assert_eq!(d["data"]["fix"]["changes"][URI][0]["newText"], "y = y + 1");
    insta::assert_json_snapshot!("push_diagnostics", tidy(diags));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_diagnostics_and_no_push() {
    let (mut c, _) = start().await;
    let init = c.initialize(pull_caps(), json!(null)).await;
    assert_eq!(
        init["capabilities"]["diagnosticProvider"]["identifier"],
        "inplace-lsp"
    );
    c.open(URI, SIGMOID).await;
    let r = c
        .request(
            "textDocument/diagnostic",
            json!({"textDocument": {"uri": URI}}),
        )
        .await;
    assert_eq!(r["kind"], "full");
    assert_eq!(r["items"][0]["code"], "IP301");
    let unknown = c
        .request_raw(
            "textDocument/diagnostic",
            json!({"textDocument": {"uri": "file:///nope.py"}}),
        )
        .await;
    assert!(unknown["error"]["code"].is_i64(), "{unknown}");
}

/// Pulls answered while settings changes keep clearing the analysis (and edits make new
/// versions): each waits for an analysis and answers from that one, or asks the client to pull
/// again (`ServerCancelled`
/// with `retriggerRequest`), never with an empty report (the client would show the file clean,
/// with no quick fix to offer). And the settings changes' refresh requests do not hold the
/// server: awaited inside the notification handler, four of them took every handler slot, the
/// messages behind them filled tower-lsp's queue, and the server read nothing more, the
/// client's answers to them included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulls_racing_settings_changes_never_come_back_empty() {
    let (mut c, _) = start().await;
    let caps = json!({"textDocument": {"diagnostic": {"dynamicRegistration": false}},
                      "workspace": {"diagnostics": {"refreshSupport": true}}});
    c.initialize(caps, json!(null)).await;
    c.open(URI, SIGMOID).await;
    let settings = json!({"settings": {"inplace-lsp": {"select": ["ALL"]}}});
    let mut pending = Vec::new();
    for k in 0..60 {
        let params = json!({"textDocument": {"uri": URI}});
        pending.push(c.start_request("textDocument/diagnostic", params).await);
        c.notify("workspace/didChangeConfiguration", settings.clone())
            .await;
        if k % 3 == 0 {
            // (A new version of the same text now and then: the analysis a pull waited for
            // may be of the version before, which it must not answer with.)
            let change = json!({"textDocument": {"uri": URI, "version": k + 2},
                                "contentChanges": [{"text": SIGMOID}]});
            c.notify("textDocument/didChange", change).await;
        }
    }
    let (mut full, mut retrigger) = (0, 0);
    for (i, rx) in pending.into_iter().enumerate() {
        let r = tokio::time::timeout(std::time::Duration::from_secs(60), rx)
            .await
            .unwrap_or_else(|_| panic!("pull {i} got no answer in time ({full} full, {retrigger} retriggered before it)"))
            .unwrap();
        if let Some(e) = r.get("error") {
            assert_eq!(e["code"], -32802, "{r}");
            assert_eq!(e["data"]["retriggerRequest"], true, "{r}");
            retrigger += 1;
            continue;
        }
        let items = r["result"]["items"].as_array().unwrap();
        let codes: Vec<_> = items.iter().map(|d| d["code"].clone()).collect();
        assert_eq!(codes, [json!("IP301")], "{r}");
        full += 1;
    }
    assert!(
        full > 0,
        "{retrigger} pulls asked to be retriggered, none answered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn utf8_and_utf32_are_negotiated() {
    for (enc, col) in [("utf-8", 9), ("utf-32", 7)] {
        let (mut c, _) = start().await;
        let caps = json!({"general": {"positionEncodings": [enc, "utf-16"]}});
        let init = c.initialize(caps, json!(null)).await;
        assert_eq!(init["capabilities"]["positionEncoding"], enc);
        c.open(URI, SIGMOID).await;
        let diags = c.diagnostics_for(URI, 1).await;
        assert_eq!(diags[0]["range"]["start"]["character"], col, "{enc}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_fixes_apply_and_clear_the_finding() {
    let cases = [
        (SIGMOID, "IP301", "y = y + 1"),
        (
            "import torch\nx = torch.tensor([2.0], requires_grad=True)\ny = torch.sigmoid(x)\ny.data.mul_(0)\ny.sum().backward()\nprint(y.data)\n",
            "IP401",
            "y = y.mul(0)",
        ),
        ("import torch\n\nx = torch.tensor([1.0, 2.0])\ny = x\ny += 1\nprint(x)\n", "IP402", "y = x.clone()"),
        // (The first fix, a copy of `identity`, leaves `self.lin(x)` reading the rectified
        // input: the finding's next fix is offered.)
        (
            "import torch\nimport torch.nn as nn\n\n\nclass Block(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.relu = nn.ReLU(inplace=True)\n        self.lin = nn.Linear(3, 3)\n\n    def forward(self, x):\n        identity = x\n        out = self.relu(x)\n        out = self.lin(out) + identity\n        return out + self.lin(x)\n\n\nBlock()(torch.randn(2, 3)).sum().backward()\n",
            "IP402",
            "nn.ReLU(inplace=False)",
        ),
    ];
    for (text, code, expect) in cases {
        let (mut c, _) = start().await;
        c.initialize(push_caps(), json!(null)).await;
        c.open(URI, text).await;
        let diags = c.diagnostics_for(URI, 1).await;
        let d = diags
            .iter()
            .find(|d| {
                d["code"] == code
                    && (code != "IP301" || d["data"]["fix"]["applicability"] != "unsafe")
            })
            .unwrap_or_else(|| panic!("{code} in {diags:?}"))
            .clone();
        let actions = c
            .request(
                "textDocument/codeAction",
                json!({"textDocument": {"uri": URI}, "range": d["range"], "context": {"diagnostics": [d]}}),
            )
            .await;
        let actions = actions.as_array().unwrap();
        let fix = &actions[0];
        assert_eq!(fix["kind"], "quickfix");
        let edits = fix["edit"]["changes"][URI].as_array().unwrap();
        let fixed = apply_edits(text, edits);
        assert!(fixed.contains(expect), "{code}: {fixed}");
        assert!(inplace_analysis::analyze_source(&fixed)
            .iter()
            .all(|f| f.rule.code() != code || f.message != d["message"]));
        let noqa = actions
            .iter()
            .find(|a| a["title"].as_str().unwrap().starts_with("Suppress"))
            .unwrap();
        let suppressed = apply_edits(text, noqa["edit"]["changes"][URI].as_array().unwrap());
        assert!(
            suppressed.contains(&format!("# noqa: {code}")),
            "{suppressed}"
        );
        assert!(inplace_analysis::analyze_source(&suppressed)
            .iter()
            .all(|f| f.rule.code() != code || f.message != d["message"]));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fix_all_source_action() {
    let (mut c, _) = start().await;
    c.initialize(push_caps(), json!(null)).await;
    c.open(URI, SIGMOID).await;
    c.diagnostics_for(URI, 1).await;
    let actions = c
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": URI}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                   "context": {"diagnostics": [], "only": ["source.fixAll.inplace-lsp"]}}),
        )
        .await;
    let a = &actions[0];
    assert_eq!(a["kind"], "source.fixAll.inplace-lsp");
    let fixed = apply_edits(SIGMOID, a["edit"]["changes"][URI].as_array().unwrap());
    assert!(fixed.contains("注 = 1; y = y + 1  # 💀 就地"), "{fixed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hover_quotes_the_runtime_error_and_explains_writes() {
    let (mut c, _) = start().await;
    c.initialize(pull_caps(), json!(null)).await;
    let text = format!("{SIGMOID}z = torch.zeros(3)\nw = z\nz.add_(1)\n");
    c.open(URI, &text).await;
    let h = c
        .request(
            "textDocument/hover",
            json!({"textDocument": {"uri": URI}, "position": {"line": 4, "character": 9}}),
        )
        .await;
    let md = h["contents"]["value"].as_str().unwrap();
    assert!(md.contains("one of the variables needed for gradient computation has been modified by an inplace operation"), "{md}");
    assert!(md.contains("output 0 of Sigmoid"), "{md}");
    assert!(md.contains("SigmoidBackward0"), "{md}");
    assert!(md.contains("raised at line 6"), "{md}");
    let h = c
        .request(
            "textDocument/hover",
            json!({"textDocument": {"uri": URI}, "position": {"line": 8, "character": 3}}),
        )
        .await;
    let md = h["contents"]["value"].as_str().unwrap();
    assert!(
        md.contains("In-place write") && md.contains("`w`") && md.contains("`z`"),
        "{md}"
    );
    let none = c
        .request(
            "textDocument/hover",
            json!({"textDocument": {"uri": URI}, "position": {"line": 0, "character": 1}}),
        )
        .await;
    assert!(none.is_null());
    let bad = c.request_raw("textDocument/hover", json!({"textDocument": {"uri": "file:///nope.py"}, "position": {"line": 0, "character": 0}})).await;
    assert!(bad.get("error").is_some());
    let out_of_range = c
        .request(
            "textDocument/hover",
            json!({"textDocument": {"uri": URI}, "position": {"line": 999, "character": 999}}),
        )
        .await;
    assert!(out_of_range.is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn burst_of_incremental_changes_matches_a_fresh_analysis() {
    let (mut c, _) = start().await;
    c.initialize(push_caps(), json!(null)).await;
    c.open(URI, SIGMOID).await;
    c.diagnostics_for(URI, 1).await;
    // 100 single-character edits: append "# 0123..." to the last line, one character at a time,
    // then an edit that removes the hazard is followed by one that brings it back.
    let mut text = SIGMOID.to_string();
    let mut version = 1;
    let last_line = text.lines().count() as u64;
    for i in 0..100u64 {
        version += 1;
        let ch = char::from(b'0' + (i % 10) as u8).to_string();
        let ins = if i == 0 { "#".to_string() } else { ch };
        c.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": URI, "version": version},
                   "contentChanges": [{"range": {"start": {"line": last_line, "character": i}, "end": {"line": last_line, "character": i}}, "text": ins}]}),
        )
        .await;
        text.push_str(&ins);
    }
    let diags = c.diagnostics_for(URI, version).await;
    let fresh = inplace_analysis::analyze_source(&text);
    assert_eq!(diags.len(), fresh.len());
    assert_eq!(diags[0]["code"], fresh[0].rule.code());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_from_initialization_and_changes() {
    let (mut c, _) = start().await;
    c.initialize(push_caps(), json!({"ignore": ["IP3"]})).await;
    c.open(URI, SIGMOID).await;
    assert!(c.diagnostics_for(URI, 1).await.is_empty());
    c.notify("workspace/didChangeConfiguration", json!({"settings": {"inplace-lsp": {"select": ["ALL"], "severities": {"IP301": "warning"}}}})).await;
    let diags = c.diagnostics_for(URI, 1).await;
    assert_eq!(diags[0]["severity"], 2);
}

/// A quick fix asked for right after a settings change (which clears the analysis and
/// schedules another) is still offered: the request waits for the analysis of the text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_fix_right_after_a_settings_change() {
    let (mut c, _) = start().await;
    c.initialize(push_caps(), json!(null)).await;
    // (Many functions: the analysis the settings change starts takes a while.)
    let text: String = (0..300)
        .map(|i| {
            format!("def f{i}(x):\n    y = torch.sigmoid(x)\n    y += 1\n    return y.sum()\n\n")
        })
        .collect();
    let text = format!("{SIGMOID}{text}");
    c.open(URI, &text).await;
    let diags = c.diagnostics_for(URI, 1).await;
    let d = diags.iter().find(|d| d["code"] == "IP301").unwrap().clone();
    c.notify(
        "workspace/didChangeConfiguration",
        json!({"settings": {"inplace-lsp": {}}}),
    )
    .await;
    let actions = c
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": URI}, "range": d["range"], "context": {"diagnostics": [d]}}),
        )
        .await;
    let actions = actions.as_array().unwrap();
    assert!(
        actions.iter().any(|a| a["kind"] == "quickfix"
            && a["edit"].is_object()
            && a["title"]
                .as_str()
                .is_some_and(|t| !t.starts_with("Suppress"))),
        "the fix, not only the suppression: {actions:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pyproject_of_the_workspace_folder() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("pyproject.toml"),
        "[tool.inplace-lsp]\nignore = [\"IP301\"]\n",
    )
    .unwrap();
    let root = url::Url::from_directory_path(dir.path()).unwrap();
    let file = root.join("m.py").unwrap();
    let (mut c, _) = start().await;
    c.request("initialize", json!({"processId": null, "capabilities": push_caps(), "workspaceFolders": [{"uri": root, "name": "w"}]})).await;
    c.notify("initialized", json!({})).await;
    c.open(file.as_str(), SIGMOID).await;
    assert!(c.diagnostics_for(file.as_str(), 1).await.is_empty());
    std::fs::write(
        dir.path().join("pyproject.toml"),
        "[tool.inplace-lsp]\nignore = []\n",
    )
    .unwrap();
    c.notify(
        "workspace/didChangeWatchedFiles",
        json!({"changes": [{"uri": root.join("pyproject.toml").unwrap(), "type": 2}]}),
    )
    .await;
    assert_eq!(c.diagnostics_for(file.as_str(), 1).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_then_exit_is_clean_and_exit_alone_is_not() {
    let (mut c, server) = start().await;
    c.initialize(push_caps(), json!(null)).await;
    c.request("shutdown", json!(null)).await;
    c.notify("exit", json!(null)).await;
    assert!(server.await.unwrap());
    let (mut c, server) = start().await;
    c.initialize(push_caps(), json!(null)).await;
    c.notify("exit", json!(null)).await;
    assert!(!server.await.unwrap());
}
