//! The language server over stdio: open latency, keystroke-to-diagnostics latency (edits in
//! function bodies, and at module level where no function reads them), memory per document.

use crate::corpus::Corpus;
use crate::report::{ms, Report};
use anyhow::{Context, Result};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A language server over stdio, with a reader thread forwarding messages.
pub struct Lsp {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    rx: mpsc::Receiver<Value>,
    next_id: i64,
}

impl Lsp {
    pub fn start(binary: &Path) -> Result<Lsp> {
        Lsp::start_in(binary, None)
    }

    /// A server with a workspace folder (`root`: its URI).
    pub fn start_in(binary: &Path, root: Option<&str>) -> Result<Lsp> {
        let mut child = Command::new(binary)
            .arg("server")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout = child.stdout.take().context("stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                let mut len = None;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(v) = line.strip_prefix("Content-Length:") {
                        len = v.trim().parse::<usize>().ok();
                    }
                }
                let Some(n) = len else { return };
                let mut body = vec![0; n];
                if r.read_exact(&mut body).is_err() {
                    return;
                }
                if let Ok(v) = serde_json::from_slice(&body) {
                    if tx.send(v).is_err() {
                        return;
                    }
                }
            }
        });
        let mut lsp = Lsp {
            child,
            stdin,
            rx,
            next_id: 1,
        };
        let folders = root.map(|r| json!([{"uri": r, "name": "bench"}]));
        lsp.request(
            "initialize",
            json!({"capabilities": {}, "workspaceFolders": folders}),
        )?;
        lsp.notify("initialized", json!({}))?;
        Ok(lsp)
    }

    fn send(&mut self, v: &Value) -> Result<()> {
        let body = serde_json::to_vec(v)?;
        write!(self.stdin, "Content-Length: {}\r\n\r\n", body.len())?;
        self.stdin.write_all(&body)?;
        self.stdin.flush()?;
        Ok(())
    }

    pub fn notify(&mut self, method: &str, params: Value) -> Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
    }

    pub fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            let m = self.rx.recv_timeout(Duration::from_secs(120))?;
            if m.get("id") == Some(&json!(id)) && m.get("method").is_none() {
                return Ok(m);
            }
        }
    }

    /// Waits for the diagnostics of `uri` at `version`.
    pub fn diagnostics(&mut self, uri: &str, version: i64) -> Result<Value> {
        self.wait(|m| {
            m["method"] == "textDocument/publishDiagnostics"
                && m["params"]["uri"] == uri
                && m["params"]["version"] == version
        })
    }

    /// Waits for a message that satisfies `want`.
    pub fn wait(&mut self, want: impl Fn(&Value) -> bool) -> Result<Value> {
        loop {
            let m = self.rx.recv_timeout(Duration::from_secs(120))?;
            if want(&m) {
                return Ok(m);
            }
        }
    }

    pub fn rss_kib(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.split_whitespace().next())
                    .and_then(|v| v.parse().ok())
            })
            .unwrap_or(0)
    }

    pub fn stop(mut self) {
        let _ = self.request("shutdown", Value::Null);
        let _ = self.notify("exit", Value::Null);
        let _ = self.child.wait();
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// p50, p99 and max of sorted latencies, against a target on (p99, max).
pub fn report_latencies(
    report: &mut Report,
    label: &str,
    sorted: &[Duration],
    target: &str,
    pass: impl Fn(Duration, Duration) -> bool,
) {
    let (p50, p99, max) = (
        percentile(sorted, 0.5),
        percentile(sorted, 0.99),
        sorted[sorted.len() - 1],
    );
    report.target(
        label,
        format!("p50 {} p99 {} max {}", ms(p50), ms(p99), ms(max)),
        target,
        pass(p99, max),
    );
}

/// A line to type at: the first line from the middle on that satisfies `pick` (its index and
/// indentation).
fn line_where(
    text: &str,
    pick: impl Fn(&[&str], usize) -> Option<usize>,
) -> Option<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mid = lines.len() / 2;
    (mid..lines.len())
        .chain(0..mid)
        .find_map(|i| pick(&lines, i).map(|indent| (i, indent)))
}

/// Type 200 characters, one `didChange` each: a new line `_b = 0` at `line` with `indent`, then
/// digits appended to it. Returns the latencies, sorted; `text` becomes the typed text.
fn type_line(
    lsp: &mut Lsp,
    uri: &str,
    text: &mut String,
    (line, indent): (usize, usize),
    first_version: i64,
) -> Result<Vec<Duration>> {
    let mut latencies = Vec::new();
    for i in 0..200i64 {
        let version = first_version + i;
        let change = if i == 0 {
            json!({"range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 0}},
                   "text": format!("{}_b = 0\n", " ".repeat(indent))})
        } else {
            let col = indent + 5 + i as usize;
            json!({"range": {"start": {"line": line, "character": col}, "end": {"line": line, "character": col}},
                   "text": "1"})
        };
        let t = Instant::now();
        lsp.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [change]}),
        )?;
        lsp.diagnostics(uri, version)?;
        latencies.push(t.elapsed());
    }
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines.insert(
        line,
        format!("{}_b = 0{}", " ".repeat(indent), "1".repeat(199)),
    );
    *text = lines.join("\n") + "\n";
    latencies.sort();
    Ok(latencies)
}

/// Opens of the 10,000-line file measured.
const OPENS: usize = 5;

/// Open the 10,000-line file, then type in a function body, then at module level.
pub fn latency(binary: &Path, text: &str, report: &mut Report) -> Result<()> {
    let uri = "file:///bench/big.py";
    // Each open in a server of its own (a cold start, as in the editor); the median of five,
    // as one sample on this VM moves by tens of percent.
    let mut opens = Vec::new();
    let mut lsp = None;
    for _ in 0..OPENS {
        let mut server = Lsp::start(binary)?;
        let started = Instant::now();
        server.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}),
        )?;
        server.diagnostics(uri, 1)?;
        opens.push(started.elapsed());
        if let Some(old) = lsp.replace(server) {
            old.stop();
        }
    }
    let mut lsp = lsp.context("no server")?;
    opens.sort();
    let open = opens[OPENS / 2];
    report.target(
        "LSP open to first diagnostics (10,000+-line file)",
        format!(
            "median {} of {OPENS} (min {}, max {})",
            ms(open),
            ms(opens[0]),
            ms(opens[OPENS - 1])
        ),
        "median < 100 ms",
        open < Duration::from_millis(100),
    );
    // In a function body: an indented line starting with a name.
    let mut current = text.to_string();
    let at = line_where(text, |lines, i| {
        let l = lines[i];
        let body = l.trim_start();
        let indent = l.len() - body.len();
        (indent >= 8 && body.starts_with(|c: char| c.is_ascii_alphabetic()) && l.is_ascii())
            .then_some(indent)
    })
    .context("no function body line")?;
    let lat = type_line(&mut lsp, uri, &mut current, at, 2)?;
    report_latencies(
        report,
        "LSP keystroke to diagnostics, in a function body (200 edits)",
        &lat,
        "p99 < 10 ms, max < 30 ms",
        |p99, max| p99 < Duration::from_millis(10) && max < Duration::from_millis(30),
    );
    // At module level, before a top-level statement, in a name no function reads.
    let at = line_where(&current.clone(), |lines, i| {
        let l = lines[i];
        let top = l.starts_with(|c: char| c.is_ascii_alphabetic())
            && !l.starts_with("def ")
            && !l.starts_with("class ")
            && i > 0
            && lines[i - 1].trim().is_empty();
        top.then_some(0)
    })
    .context("no module-level line")?;
    let lat = type_line(&mut lsp, uri, &mut current, at, 202)?;
    report_latencies(
        report,
        "LSP keystroke to diagnostics, at module level (200 edits no function reads)",
        &lat,
        "p99 < 10 ms",
        |p99, _| p99 < Duration::from_millis(10),
    );
    lsp.stop();
    Ok(())
}

/// RSS growth over 100 open documents, per document, against their text.
pub fn memory_per_document(binary: &Path, c: &Corpus, report: &mut Report) -> Result<()> {
    let docs: Vec<&(PathBuf, String)> = c
        .files
        .iter()
        .filter(|(_, t)| inplace_analysis::mentions_torch(t) && t.len() > 2_000)
        .step_by(7)
        .take(100)
        .collect();
    let mut lsp = Lsp::start(binary)?;
    let settle = |lsp: &mut Lsp, n: usize| -> Result<()> {
        let uri = format!("file:///bench/settle{n}.py");
        lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": "import torch\n"}}))?;
        lsp.diagnostics(&uri, 1).map(|_| ())
    };
    settle(&mut lsp, 0)?;
    let before = lsp.rss_kib();
    let mut bytes = 0;
    for (i, (_, text)) in docs.iter().enumerate() {
        let uri = format!("file:///bench/doc{i}.py");
        lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}))?;
        lsp.diagnostics(&uri, 1)?;
        bytes += text.len();
    }
    settle(&mut lsp, 1)?;
    let after = lsp.rss_kib();
    lsp.stop();
    let per = after.saturating_sub(before) as f64 / docs.len() as f64;
    let text = bytes as f64 / 1024.0 / docs.len() as f64;
    report.target(
        "memory per open document (RSS growth over 100 open files)",
        format!(
            "{per:.0} KiB per document = {:.1}x its text (documents average {text:.0} KiB; {before} -> {after} KiB)",
            per / text
        ),
        "<= 10x its text",
        per <= 10.0 * text,
    );
    Ok(())
}
