//! `cargo xtask fuzz [--time SECONDS] [TARGET ...]`: the libFuzzer targets of `crates/fuzz`, each
//! for a bounded time, on a corpus kept in `target/fuzz/corpus/<target>` and seeded from `tests/`.
//! A crash fails the run; its input is in `target/fuzz/artifacts/<target>/` (replay it with
//! `RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir crates/fuzz <target> <file>`), and it becomes a
//! regression test. cargo-fuzz is installed when missing; it needs nightly flags, which the
//! stable toolchain accepts with `RUSTC_BOOTSTRAP=1`.

use crate::{cargo, root, run};
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::{Command, Stdio};

pub const TARGETS: &[&str] = &[
    "analyze_bytes",
    "analyze_splice",
    "fix_roundtrip",
    "lsp_messages",
    "positions",
];

fn cargo_fuzz() -> Command {
    let mut c = cargo();
    c.arg("fuzz").env("RUSTC_BOOTSTRAP", "1");
    c
}

fn ensure_cargo_fuzz() -> Result<()> {
    let installed = cargo_fuzz()
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !installed {
        run(cargo().args(["install", "cargo-fuzz", "--locked", "--version", "0.13.2"]))?;
    }
    Ok(())
}

/// Python seeds: every `.py` under `tests/`.
fn python_seeds(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut stack = vec![root().join("tests")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "py") {
                let rel = p.strip_prefix(root())?.to_string_lossy().replace('/', "_");
                std::fs::copy(&p, dir.join(rel))?;
            }
        }
    }
    Ok(())
}

/// LSP seeds: sessions over the chapter's examples (the pieces of a seed, split on 0xFF, are
/// the messages `lsp_messages` frames after its handshake).
fn lsp_seeds(dir: &Path) -> Result<()> {
    use serde_json::json;
    std::fs::create_dir_all(dir)?;
    let mut files = crate::chapter_examples()?;
    files.push(root().join("tests/demo/hazards.py"));
    for (i, f) in files.iter().enumerate() {
        let text = std::fs::read_to_string(f)?;
        let uri = format!(
            "file:///w/{}",
            f.file_name().context("name")?.to_string_lossy()
        );
        let doc = json!({"uri": uri});
        let range = |l0: u32, c0: u32, l1: u32, c1: u32| json!({"start": {"line": l0, "character": c0}, "end": {"line": l1, "character": c1}});
        let messages = [
            json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}}),
            json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"range": range(3, 0, 3, 4), "text": "y += 1\n"}]}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "textDocument/hover", "params": {"textDocument": doc, "position": {"line": 5, "character": 4}}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "textDocument/codeAction", "params": {"textDocument": doc, "range": range(0, 0, 40, 0), "context": {"diagnostics": []}}}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "textDocument/diagnostic", "params": {"textDocument": doc}}),
            json!({"jsonrpc": "2.0", "method": "workspace/didChangeConfiguration", "params": {"settings": {"inplaceLsp": {"select": ["IP3"], "ignore": ["IP401"]}}}}),
            json!({"jsonrpc": "2.0", "method": "textDocument/didClose", "params": {"textDocument": doc}}),
            json!({"jsonrpc": "2.0", "id": 4, "method": "shutdown"}),
            json!({"jsonrpc": "2.0", "method": "exit"}),
        ];
        write_session(&dir.join(format!("session{i}")), &messages)?;
    }
    notebook_seed(dir)
}

/// A seed of `lsp_messages`: the messages' JSON, separated by 0xFF.
fn write_session(path: &Path, messages: &[serde_json::Value]) -> Result<()> {
    let bytes: Vec<Vec<u8>> = messages
        .iter()
        .map(serde_json::to_vec)
        .collect::<std::result::Result<_, _>>()?;
    std::fs::write(path, bytes.join(&0xFF))?;
    Ok(())
}

/// A notebook session over the demo notebook: its cells opened, a cell edited, cells added,
/// moved and removed, requests on a cell, the notebook closed.
fn notebook_seed(dir: &Path) -> Result<()> {
    use serde_json::{json, Value};
    let nb: Value = serde_json::from_str(&std::fs::read_to_string(
        root().join("tests/demo/notebook.ipynb"),
    )?)?;
    let cells = nb["cells"].as_array().context("cells")?;
    let uri = "file:///w/demo.ipynb";
    let cell = |i: usize| format!("vscode-notebook-cell:/w/demo.ipynb#c{i}");
    let kind = |c: &Value| if c["cell_type"] == "code" { 2 } else { 1 };
    let text = |c: &Value| -> String {
        c["source"]
            .as_array()
            .map(|l| l.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    };
    let range = |l0: u32, c0: u32, l1: u32, c1: u32| json!({"start": {"line": l0, "character": c0}, "end": {"line": l1, "character": c1}});
    let messages = [
        json!({"jsonrpc": "2.0", "method": "notebookDocument/didOpen", "params": {
            "notebookDocument": {"uri": uri, "notebookType": "jupyter-notebook", "version": 1,
                "cells": cells.iter().enumerate().map(|(i, c)| json!({"kind": kind(c), "document": cell(i)})).collect::<Vec<_>>()},
            "cellTextDocuments": cells.iter().enumerate().map(|(i, c)| json!({"uri": cell(i), "languageId": "python", "version": 1, "text": text(c)})).collect::<Vec<_>>()}}),
        json!({"jsonrpc": "2.0", "method": "notebookDocument/didChange", "params": {"notebookDocument": {"uri": uri, "version": 2},
            "change": {"cells": {"textContent": [{"document": {"uri": cell(4), "version": 2}, "changes": [{"range": range(1, 0, 1, 6), "text": "h = h * 2"}]}]}}}}),
        json!({"jsonrpc": "2.0", "method": "notebookDocument/didChange", "params": {"notebookDocument": {"uri": uri, "version": 3},
            "change": {"cells": {"structure": {"array": {"start": 2, "deleteCount": 1, "cells": [{"kind": 2, "document": cell(9)}, {"kind": 1, "document": cell(3)}]},
                "didOpen": [{"uri": cell(9), "languageId": "python", "version": 1, "text": "h.mul_(3)\n"}], "didClose": [{"uri": cell(2)}]},
                "data": [{"kind": 2, "document": cell(3)}]}}}}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "textDocument/hover", "params": {"textDocument": {"uri": cell(9)}, "position": {"line": 0, "character": 2}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "textDocument/codeAction", "params": {"textDocument": {"uri": cell(9)}, "range": range(0, 0, 1, 0), "context": {"diagnostics": []}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "textDocument/diagnostic", "params": {"textDocument": {"uri": cell(4)}}}),
        json!({"jsonrpc": "2.0", "method": "notebookDocument/didClose", "params": {"notebookDocument": {"uri": uri}, "cellTextDocuments": [{"uri": cell(1)}]}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "shutdown"}),
        json!({"jsonrpc": "2.0", "method": "exit"}),
    ];
    write_session(&dir.join("notebook-session"), &messages)
}

/// Most inputs kept in a target's corpus between runs. libFuzzer replays its whole corpus
/// before the time limit counts: the corpus of `fix_roundtrip` had grown to 4,353 inputs over
/// many runs, and its replay under ASan took minutes instead of the 20 s the suite gives it.
const MAX_KEPT_INPUTS: usize = 500;

/// Keep the `max` newest inputs of a corpus folder (the seeds are passed on their own).
fn prune_corpus(corpus: &Path, max: usize) -> Result<()> {
    let mut inputs: Vec<(std::time::SystemTime, std::path::PathBuf)> = std::fs::read_dir(corpus)?
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if inputs.len() <= max {
        return Ok(());
    }
    inputs.sort();
    for (_, path) in &inputs[..inputs.len() - max] {
        std::fs::remove_file(path)?;
    }
    Ok(())
}

/// Runs `target` for `seconds`; returns the number of inputs it executed.
fn run_target(target: &str, seconds: u64) -> Result<u64> {
    let base = root().join("target/fuzz");
    let corpus = base.join("corpus").join(target);
    let artifacts = base.join("artifacts").join(target);
    std::fs::create_dir_all(&corpus)?;
    std::fs::create_dir_all(&artifacts)?;
    prune_corpus(&corpus, MAX_KEPT_INPUTS)?;
    let mut cmd = cargo_fuzz();
    cmd.args(["run", "--fuzz-dir", "crates/fuzz", target])
        .arg(&corpus);
    match target {
        "analyze_bytes" | "analyze_splice" | "fix_roundtrip" => {
            cmd.arg(base.join("seed-py"));
        }
        "lsp_messages" => {
            cmd.arg(base.join("seed-lsp"));
        }
        _ => {}
    }
    cmd.arg("--")
        .arg(format!("-max_total_time={seconds}"))
        .arg("-timeout=30")
        .arg("-rss_limit_mb=3072")
        .arg("-max_len=65536")
        .arg("-print_final_stats=1")
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .current_dir(root())
        .stderr(Stdio::piped());
    eprintln!("xtask: fuzzing {target} for {seconds} s");
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    let log = String::from_utf8_lossy(&out.stderr);
    let executed = log
        .lines()
        .find_map(|l| l.strip_prefix("stat::number_of_executed_units:"))
        .and_then(|n| n.trim().parse().ok());
    if !out.status.success() {
        let tail: Vec<&str> = log.lines().rev().take(60).collect();
        eprintln!("{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
        bail!(
            "fuzz target {target} failed: see the input in {}",
            artifacts.display()
        );
    }
    let executed = executed.context("no final stats from libFuzzer")?;
    eprintln!("xtask: {target}: {executed} inputs in {seconds} s, no failure");
    Ok(executed)
}

pub fn fuzz(seconds: u64, targets: &[String]) -> Result<()> {
    let chosen: Vec<&str> = if targets.is_empty() {
        TARGETS.to_vec()
    } else {
        for t in targets {
            if !TARGETS.contains(&t.as_str()) {
                bail!(
                    "unknown fuzz target {t}; the targets are {}",
                    TARGETS.join(", ")
                );
            }
        }
        targets.iter().map(String::as_str).collect()
    };
    ensure_cargo_fuzz()?;
    let base = root().join("target/fuzz");
    python_seeds(&base.join("seed-py"))?;
    lsp_seeds(&base.join("seed-lsp"))?;
    run(cargo_fuzz().args(["build", "--fuzz-dir", "crates/fuzz"]))?;
    let mut summary = Vec::new();
    for t in chosen {
        summary.push(format!("{t}: {} inputs", run_target(t, seconds)?));
    }
    eprintln!("xtask: fuzzing found nothing ({})", summary.join(", "));
    Ok(())
}
