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
