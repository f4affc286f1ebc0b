//! A small LSP test client over any byte stream: framing, request/response matching, answers
//! to server requests, and a queue of notifications.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot, Mutex};

pub struct Client {
    writer: Arc<Mutex<Box<dyn AsyncWrite + Unpin + Send>>>,
    pending: Arc<Mutex<HashMap<i64, oneshot::Sender<Value>>>>,
    notes: mpsc::UnboundedReceiver<Value>,
    next_id: i64,
}

pub async fn write_message(w: &mut (dyn AsyncWrite + Unpin + Send), v: &Value) {
    let body = serde_json::to_vec(v).unwrap();
    w.write_all(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes())
        .await
        .unwrap();
    w.write_all(&body).await.unwrap();
    w.flush().await.unwrap();
}

pub async fn read_message<R: AsyncRead + Unpin>(r: &mut BufReader<R>) -> Option<Value> {
    let mut len = None;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length: ") {
            len = v.parse::<usize>().ok();
        }
    }
    let mut body = vec![0; len?];
    r.read_exact(&mut body).await.ok()?;
    Some(serde_json::from_slice(&body).expect("the server writes JSON"))
}

impl Client {
    pub fn new<R, W>(reader: R, writer: W) -> Client
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let writer: Arc<Mutex<Box<dyn AsyncWrite + Unpin + Send>>> =
            Arc::new(Mutex::new(Box::new(writer)));
        let pending: Arc<Mutex<HashMap<i64, oneshot::Sender<Value>>>> = Arc::default();
        let (tx, notes) = mpsc::unbounded_channel();
        let (w, p) = (writer.clone(), pending.clone());
        tokio::spawn(async move {
            let mut reader = BufReader::new(reader);
            while let Some(msg) = read_message(&mut reader).await {
                if msg.get("method").is_some() && msg.get("id").is_some() {
                    // A request from the server (registerCapability, refresh): accept it.
                    let reply = json!({"jsonrpc": "2.0", "id": msg["id"], "result": null});
                    write_message(&mut **w.lock().await, &reply).await;
                    let _ = tx.send(msg);
                } else if msg.get("method").is_some() {
                    let _ = tx.send(msg);
                } else if let Some(id) = msg["id"].as_i64() {
                    if let Some(s) = p.lock().await.remove(&id) {
                        let _ = s.send(msg);
                    }
                }
            }
        });
        Client {
            writer,
            pending,
            notes,
            next_id: 1,
        }
    }

    /// Send raw bytes (for malformed traffic).
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        let mut w = self.writer.lock().await;
        w.write_all(bytes).await.unwrap();
        w.flush().await.unwrap();
    }

    /// Send a request with a given id and wait for the response.
    pub async fn request_with_id(&mut self, id: i64, method: &str, params: Value) -> Value {
        let (tx, rx) = oneshot::channel();
        self.pending.lock().await.insert(id, tx);
        let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if msg["params"].is_null() {
            // `shutdown` and friends take no params; most clients leave the field out.
            msg.as_object_mut().unwrap().remove("params");
        }
        write_message(&mut **self.writer.lock().await, &msg).await;
        tokio::time::timeout(Duration::from_secs(20), rx)
            .await
            .expect("response in time")
            .unwrap()
    }

    /// Send a request without waiting: its whole response message arrives on the receiver.
    pub async fn start_request(&mut self, method: &str, params: Value) -> oneshot::Receiver<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let (tx, rx) = oneshot::channel();
        self.pending.lock().await.insert(id, tx);
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        write_message(&mut **self.writer.lock().await, &msg).await;
        rx
    }

    /// Send a request and wait for its whole response message.
    pub async fn request_raw(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.request_with_id(id, method, params).await
    }

    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let r = self.request_raw(method, params).await;
        assert!(r.get("error").is_none(), "{method} failed: {r}");
        r["result"].clone()
    }

    pub async fn notify(&mut self, method: &str, params: Value) {
        let mut msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        if msg["params"].is_null() {
            msg.as_object_mut().unwrap().remove("params");
        }
        write_message(&mut **self.writer.lock().await, &msg).await;
    }

    /// The next notification with this method (others are skipped).
    pub async fn wait_for(&mut self, method: &str) -> Value {
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(20), self.notes.recv())
                .await
                .unwrap_or_else(|_| panic!("no {method} in time"))
                .expect("server still running");
            if msg["method"] == method {
                return msg["params"].clone();
            }
        }
    }

    /// Diagnostics published for `uri` at `version`.
    pub async fn diagnostics_for(&mut self, uri: &str, version: i64) -> Vec<Value> {
        loop {
            let p = self.wait_for("textDocument/publishDiagnostics").await;
            if p["uri"] == uri && p["version"] == version {
                return p["diagnostics"].as_array().unwrap().clone();
            }
        }
    }

    pub async fn initialize(&mut self, capabilities: Value, options: Value) -> Value {
        let r = self
            .request(
                "initialize",
                json!({"processId": null, "rootUri": null, "capabilities": capabilities, "initializationOptions": options}),
            )
            .await;
        self.notify("initialized", json!({})).await;
        r
    }

    pub async fn open(&mut self, uri: &str, text: &str) {
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}),
        )
        .await;
    }
}

/// Apply LSP text edits (UTF-16 positions) to a text.
pub fn apply_edits(text: &str, edits: &[Value]) -> String {
    let lines = inplace_analysis::LineIndex::new(text);
    let mut spans: Vec<(usize, usize, String)> = edits
        .iter()
        .map(|e| {
            let at = |p: &Value| {
                lines.offset(
                    text,
                    p["line"].as_u64().unwrap() as usize,
                    p["character"].as_u64().unwrap() as usize,
                    inplace_analysis::Encoding::Utf16,
                )
            };
            (
                at(&e["range"]["start"]),
                at(&e["range"]["end"]),
                e["newText"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    spans.sort_by_key(|s| std::cmp::Reverse(s.0));
    let mut out = text.to_string();
    for (s, e, t) in spans {
        out.replace_range(s..e, &t);
    }
    out
}
