//! The server follows a document's imports into the project: the module's open text wins over
//! the disk, an edit of the module re-analyses its open importers, and related information
//! points into the module's file.

mod common;

use common::Client;
use serde_json::{json, Value};

const HELPER: &str = "def normalize_(t):\n    \"\"\"Scale `t` to sum to one, in place.\"\"\"\n    t /= t.sum(dim=-1, keepdim=True)\n    return t\n";
const HELPER_FIXED: &str = "def normalize_(t):\n    \"\"\"Scale `t` to sum to one.\"\"\"\n    t = t / t.sum(dim=-1, keepdim=True)\n    return t\n";
const TRAIN: &str = "import torch\nfrom utils import normalize_\n\nlogits = torch.randn(3, 5, requires_grad=True)\nprobs = torch.exp(logits)\nnormalize_(probs)\nloss = -probs[:, 0].log().mean()\nloss.backward()\n";

struct Project {
    _dir: tempfile::TempDir,
    root: url::Url,
    train: String,
    utils: String,
    utils_path: std::path::PathBuf,
}

fn project() -> Project {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap();
    std::fs::write(path.join("utils.py"), HELPER).unwrap();
    std::fs::write(path.join("train.py"), TRAIN).unwrap();
    let root = url::Url::from_directory_path(&path).unwrap();
    Project {
        train: root.join("train.py").unwrap().to_string(),
        utils: root.join("utils.py").unwrap().to_string(),
        utils_path: path.join("utils.py"),
        root,
        _dir: dir,
    }
}

async fn start(p: &Project, capabilities: Value) -> Client {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let (sr, sw) = tokio::io::split(server_io);
    tokio::spawn(inplace_server::serve(sr, sw));
    let (cr, cw) = tokio::io::split(client_io);
    let mut c = Client::new(cr, cw);
    c.request(
        "initialize",
        json!({"processId": null, "capabilities": capabilities,
               "workspaceFolders": [{"uri": p.root, "name": "w"}]}),
    )
    .await;
    c.notify("initialized", json!({})).await;
    c
}

/// The next diagnostics published for `uri` that satisfy `done`.
async fn published_until(c: &mut Client, uri: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    loop {
        let p = c.wait_for("textDocument/publishDiagnostics").await;
        let diags = p["diagnostics"].as_array().unwrap().clone();
        if p["uri"] == uri && done(&diags) {
            return diags;
        }
    }
}

fn codes(diags: &[Value]) -> Vec<&str> {
    diags.iter().filter_map(|d| d["code"].as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_of_an_imported_module_reanalyses_its_open_importer() {
    let p = project();
    let mut c = start(
        &p,
        json!({"textDocument": {"publishDiagnostics": {"relatedInformation": true}}}),
    )
    .await;
    c.open(&p.train, TRAIN).await;
    let diags = c.diagnostics_for(&p.train, 1).await;
    assert_eq!(codes(&diags), ["IP301"], "{diags:?}");
    // At the call in train.py; the write itself is related information in utils.py.
    assert_eq!(diags[0]["range"]["start"]["line"], 5);
    let related = diags[0]["relatedInformation"].as_array().unwrap();
    let inside = related
        .iter()
        .find(|r| r["location"]["uri"] == p.utils.as_str())
        .unwrap_or_else(|| panic!("no related location in utils.py: {related:?}"));
    assert_eq!(inside["location"]["range"]["start"]["line"], 2);
    assert_eq!(inside["location"]["range"]["start"]["character"], 4);

    // The module opened and edited (unsaved): the importer's diagnostics follow its text.
    c.open(&p.utils, HELPER).await;
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": p.utils, "version": 2}, "contentChanges": [{"text": HELPER_FIXED}]}),
    )
    .await;
    published_until(&mut c, &p.train, |d| d.is_empty()).await;

    // Closed without saving: the file on disk stands for it again.
    c.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": p.utils}}),
    )
    .await;
    let again = published_until(&mut c, &p.train, |d| !d.is_empty()).await;
    assert_eq!(codes(&again), ["IP301"]);

    // Changed on disk, as the file watcher reports.
    std::fs::write(&p.utils_path, HELPER_FIXED).unwrap();
    c.notify(
        "workspace/didChangeWatchedFiles",
        json!({"changes": [{"uri": p.utils, "type": 2}]}),
    )
    .await;
    published_until(&mut c, &p.train, |d| d.is_empty()).await;
}

async fn pull(c: &mut Client, uri: &str) -> Vec<Value> {
    c.request(
        "textDocument/diagnostic",
        json!({"textDocument": {"uri": uri}}),
    )
    .await["items"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_created_later_resolves_and_pulled_diagnostics_name_it() {
    let p = project();
    std::fs::remove_file(&p.utils_path).unwrap();
    let caps = json!({"textDocument": {"diagnostic": {"dynamicRegistration": false}},
                      "workspace": {"diagnostics": {"refreshSupport": true}}});
    let mut c = start(&p, caps).await;
    c.open(&p.train, TRAIN).await;
    // The helper is nowhere: opaque, nothing to report.
    assert!(pull(&mut c, &p.train).await.is_empty());
    std::fs::write(&p.utils_path, HELPER).unwrap();
    c.notify(
        "workspace/didChangeWatchedFiles",
        json!({"changes": [{"uri": p.utils, "type": 1}]}),
    )
    .await;
    // The server asks the client to pull again.
    c.wait_for("workspace/diagnostic/refresh").await;
    let diags = pull(&mut c, &p.train).await;
    assert_eq!(codes(&diags), ["IP301"]);
    let related = diags[0]["relatedInformation"].as_array().unwrap();
    assert!(
        related
            .iter()
            .any(|r| r["location"]["uri"] == p.utils.as_str()),
        "{related:?}"
    );
}
