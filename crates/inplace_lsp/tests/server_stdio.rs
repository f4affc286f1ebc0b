//! `inplace-lsp server` over real stdio, driven by the test client of the server crate.

#[path = "../../inplace_server/tests/common/mod.rs"]
mod common;

use common::Client;
use serde_json::json;

const URI: &str = "file:///work/model.py";
const SIGMOID: &str = "import torch\n\nx = torch.tensor([1.0, 2.0], requires_grad=True)\ny = torch.sigmoid(x)\ny += 1\ny.sum().backward()\n";

async fn spawn() -> (Client, tokio::process::Child) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_inplace-lsp"))
        .args(["server", "--stdio"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let client = Client::new(child.stdout.take().unwrap(), child.stdin.take().unwrap());
    (client, child)
}

async fn status(child: &mut tokio::process::Child) -> Option<i32> {
    tokio::time::timeout(std::time::Duration::from_secs(10), child.wait())
        .await
        .expect("exits in time")
        .unwrap()
        .code()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnostics_hover_and_clean_exit() {
    let (mut c, mut child) = spawn().await;
    c.initialize(json!({}), json!(null)).await;
    c.open(URI, SIGMOID).await;
    let diags = c.diagnostics_for(URI, 1).await;
    assert_eq!(diags[0]["code"], "IP301");
    let h = c
        .request(
            "textDocument/hover",
            json!({"textDocument": {"uri": URI}, "position": {"line": 4, "character": 1}}),
        )
        .await;
    assert!(h["contents"]["value"]
        .as_str()
        .unwrap()
        .contains("one of the variables needed for gradient computation"));
    c.request("shutdown", json!(null)).await;
    c.notify("exit", json!(null)).await;
    assert_eq!(status(&mut child).await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_without_shutdown_is_status_one() {
    let (mut c, mut child) = spawn().await;
    c.initialize(json!({}), json!(null)).await;
    c.notify("exit", json!(null)).await;
    assert_eq!(status(&mut child).await, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_traffic_gets_errors_and_the_server_keeps_serving() {
    let (mut c, mut child) = spawn().await;
    // A request before `initialize`.
    let early = c
        .request_with_id(
            900,
            "textDocument/hover",
            json!({"textDocument": {"uri": URI}, "position": {"line": 0, "character": 0}}),
        )
        .await;
    assert!(early["error"]["code"].is_i64(), "{early}");
    // Malformed JSON with a right Content-Length: a parse error, then business as usual.
    c.send_raw(b"Content-Length: 12\r\n\r\n{not json!!}").await;
    // A Content-Length shorter than the body, then a header line that is no header.
    c.send_raw(b"Content-Length: 5\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"x\"}")
        .await;
    c.send_raw(b"\r\nnot a header\r\n\r\n").await;
    c.initialize(json!({}), json!(null)).await;
    let unknown = c.request_raw("inplace/doesNotExist", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    // Changes and requests for documents that are not open.
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": "file:///closed.py", "version": 3}, "contentChanges": [{"text": "x"}]}),
    )
    .await;
    let hover = c.request_raw("textDocument/hover", json!({"textDocument": {"uri": "file:///closed.py"}, "position": {"line": 0, "character": 0}})).await;
    assert!(hover["error"].is_object(), "{hover}");
    let bad_params = c
        .request_raw("textDocument/hover", json!({"nope": 1}))
        .await;
    assert!(bad_params["error"].is_object(), "{bad_params}");
    // Open, then positions out of range, a stale version, and rapid open/close cycles.
    c.open(URI, SIGMOID).await;
    assert_eq!(c.diagnostics_for(URI, 1).await.len(), 1);
    let far = c
        .request(
            "textDocument/hover",
            json!({"textDocument": {"uri": URI}, "position": {"line": 9999, "character": 9999}}),
        )
        .await;
    assert!(far.is_null());
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": URI, "version": 5},
               "contentChanges": [{"range": {"start": {"line": 900, "character": 3}, "end": {"line": 901, "character": 0}}, "text": "# end\n"}]}),
    )
    .await;
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": URI, "version": 4}, "contentChanges": [{"text": "stale"}]}),
    )
    .await;
    assert_eq!(c.diagnostics_for(URI, 5).await.len(), 1);
    for i in 0..20 {
        let uri = format!("file:///cycle{i}.py");
        c.open(&uri, SIGMOID).await;
        c.notify(
            "textDocument/didClose",
            json!({"textDocument": {"uri": uri}}),
        )
        .await;
    }
    let r = c.request("textDocument/codeAction", json!({"textDocument": {"uri": URI}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "context": {"diagnostics": []}})).await;
    assert!(r.is_array());
    c.request("shutdown", json!(null)).await;
    c.notify("exit", json!(null)).await;
    assert_eq!(status(&mut child).await, Some(0));
}

/// Resident memory of a process, from /proc (Linux), in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// Open a sentinel document and wait for its diagnostics: everything sent before is handled.
async fn settle(c: &mut Client, n: i64) {
    let uri = format!("file:///work/sentinel{n}.py");
    c.open(&uri, SIGMOID).await;
    assert_eq!(c.diagnostics_for(&uri, 1).await.len(), 1);
    c.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": uri}}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_returns_to_its_level_after_a_thousand_documents() {
    let (mut c, mut child) = spawn().await;
    let pid = child.id().unwrap();
    c.initialize(json!({}), json!(null)).await;
    // ~15 KB of torch code per document: leaking the text, tree and analysis of 1,000 of them
    // would be well over 100 MB.
    let text = SIGMOID.repeat(100);
    let cycle = |i: usize| format!("file:///work/doc{i}.py");
    for i in 0..100 {
        c.open(&cycle(i), &text).await;
        c.notify(
            "textDocument/didClose",
            json!({"textDocument": {"uri": cycle(i)}}),
        )
        .await;
    }
    settle(&mut c, 0).await;
    let before = rss_kib(pid);
    for i in 0..1000 {
        c.open(&cycle(i), &text).await;
        c.notify(
            "textDocument/didClose",
            json!({"textDocument": {"uri": cycle(i)}}),
        )
        .await;
    }
    settle(&mut c, 1).await;
    let after = rss_kib(pid);
    assert!(
        after < before + 24 * 1024,
        "RSS grew from {before} KiB to {after} KiB over 1,000 open/close cycles"
    );
    c.request("shutdown", json!(null)).await;
    c.notify("exit", json!(null)).await;
    assert_eq!(status(&mut child).await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_document_does_not_stall_the_others() {
    let (mut c, mut child) = spawn().await;
    c.initialize(json!({}), json!(null)).await;
    // Thousands of functions, each with hazards: seconds of analysis in a debug build.
    let big: String = (0..6_000)
        .map(|i| format!("def f{i}(x):\n    w = torch.ones(3, requires_grad=True)\n    y = torch.sigmoid(x * w)\n    y += 1\n    y.sum().backward()\n\n"))
        .collect();
    c.open("file:///work/huge.py", &format!("import torch\n{big}"))
        .await;
    c.open(URI, SIGMOID).await;
    // The small document's diagnostics come first: each document is analysed on its own
    // blocking thread, so the huge one does not hold up the rest.
    let first = c.wait_for("textDocument/publishDiagnostics").await;
    assert_eq!(first["uri"], URI, "the huge document was published first");
    assert_eq!(first["diagnostics"].as_array().unwrap().len(), 1);
    let hover = c
        .request(
            "textDocument/hover",
            json!({"textDocument": {"uri": URI}, "position": {"line": 4, "character": 0}}),
        )
        .await;
    assert!(hover.is_object(), "{hover}");
    c.notify("exit", json!(null)).await;
    assert_eq!(status(&mut child).await, Some(1));
}
