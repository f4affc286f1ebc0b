//! Cross-file figures: how many of the corpus's project-internal imports resolve, and the
//! server's latency from an edit in an imported module to its open importer's new diagnostics
//! (a generated project of 50 files).

use crate::corpus::Corpus;
use crate::lsp::{report_latencies, Lsp};
use crate::report::Report;
use anyhow::{Context, Result};
use inplace_analysis::project::{imported_paths, ModuleLookup};
use inplace_server::project::{DiskReader, FileLookup, ProjectLayout};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Of the top-level imports of every corpus file that name the file's own package (relative
/// imports, and absolute ones starting with the package's name), how many resolve to a module
/// of the package (the imported name itself, or the module it is imported from).
pub fn import_resolution(c: &Corpus, corpus_dir: &Path, report: &mut Report) {
    let reader = DiskReader::default();
    let (mut internal, mut resolved, mut files) = (0usize, 0usize, 0usize);
    let mut unresolved: Vec<String> = Vec::new();
    for (path, text) in &c.files {
        let Ok(file) = path.canonicalize() else {
            continue;
        };
        // corpus/<wheel>/<package>/...: the package's name.
        let Some(package) = path
            .strip_prefix(corpus_dir)
            .ok()
            .and_then(|rel| rel.iter().nth(1))
            .map(|p| p.to_string_lossy().trim_end_matches(".py").to_string())
        else {
            continue;
        };
        let layout = ProjectLayout::of(&file, None);
        let lookup = FileLookup {
            layout: &layout,
            reader: &reader,
            origin: &|p| p.display().to_string(),
            file: &file,
            overlay: None,
        };
        let from = layout.entry.clone().unwrap_or_default();
        files += 1;
        for imported in imported_paths(text) {
            let Some(abs) = from.absolute(&imported) else {
                // Climbs above the top package: internal, and unresolvable.
                internal += 1;
                unresolved.push(format!("{}: {imported}", path.display()));
                continue;
            };
            if !imported.starts_with('.') && abs.split('.').next() != Some(package.as_str()) {
                continue;
            }
            internal += 1;
            let parent = abs.rsplit_once('.').map(|(p, _)| p);
            let found =
                lookup.find(&abs).is_some() || parent.is_some_and(|p| lookup.find(p).is_some());
            if found {
                resolved += 1;
            } else {
                unresolved.push(format!("{}: {imported}", path.display()));
            }
        }
    }
    report.target(
        "project-internal imports that resolve (top level, corpus)",
        format!(
            "{resolved} of {internal} ({:.1}%) in {files} files",
            100.0 * resolved as f64 / internal.max(1) as f64
        ),
        ">= 99%",
        resolved * 100 >= internal * 99,
    );
    for u in unresolved.iter().take(5) {
        println!("  unresolved: {u}");
    }
}

/// Files of the generated project.
const BLOCKS: usize = 4;
const LAYERS: usize = 20;
const TOOLS: usize = 22;

/// A block module: `BLOCKS` residual blocks; the first one's line `h = h + 1` is what the
/// bench toggles to `h += 1` (an in-place write on sigmoid's saved output: IP301 at the
/// importer's call).
fn blocks_module() -> String {
    let mut s =
        String::from("import torch\nimport torch.nn as nn\nfrom .layers import layer_0\n\n");
    for i in 0..BLOCKS {
        s.push_str(&format!(
            "\nclass Block{i}(nn.Module):\n    \"\"\"Residual block {i}.\"\"\"\n\n    def __init__(self, dim):\n        super().__init__()\n        self.fc = nn.Linear(dim, dim)\n        self.norm = nn.LayerNorm(dim)\n        self.proj = layer_0.Proj(dim)\n\n    def forward(self, x):\n        h = torch.sigmoid(self.fc(self.norm(x)))\n        h = h + 1\n        return x + self.proj(h)\n\n"
        ));
    }
    s
}

fn layer_module(i: usize) -> String {
    format!(
        "import torch\nimport torch.nn as nn\n\n\nclass Proj(nn.Module):\n    \"\"\"Projection {i}.\"\"\"\n\n    def __init__(self, dim):\n        super().__init__()\n        self.w = nn.Linear(dim, dim, bias=False)\n        self.scale = {i}.0 + 1.0\n\n    def forward(self, x):\n        return self.w(x) / self.scale\n\n\ndef init_weights_{i}(m):\n    if isinstance(m, nn.Linear):\n        with torch.no_grad():\n            m.weight.mul_(0.5)\n"
    )
}

const TRAIN: &str = "import torch\nimport torch.nn as nn\nfrom net import Encoder\nfrom net.utils import count_parameters\nfrom data import make_batch\n\n\ndef train(steps=3):\n    model = Encoder(8)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    for _ in range(steps):\n        x, y = make_batch(4, 8)\n        out = model(x)\n        loss = nn.functional.mse_loss(out, y)\n        opt.zero_grad()\n        loss.backward()\n        opt.step()\n    return count_parameters(model)\n\n\nif __name__ == \"__main__\":\n    train()\n";

/// Writes a 50-file project: `train.py` imports the package `net` (whose `__init__` re-exports
/// its encoder, built of blocks, built of layers), `data.py` and `net.utils`; the rest are
/// modules nobody imports. Returns the paths of `train.py` and `net/blocks.py`.
fn write_project(dir: &Path) -> Result<(PathBuf, PathBuf)> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    let layers = dir.join("net/layers");
    let tools = dir.join("tools");
    std::fs::create_dir_all(&layers)?;
    std::fs::create_dir_all(&tools)?;
    let mut files: Vec<(PathBuf, String)> = vec![
        (dir.join("pyproject.toml"), "[project]\nname = \"bench\"\n".into()),
        (dir.join("train.py"), TRAIN.into()),
        (dir.join("data.py"), "import torch\n\n\ndef make_batch(n, dim):\n    return torch.randn(n, dim), torch.randn(n, dim)\n".into()),
        (dir.join("net/__init__.py"), "from .encoder import Encoder\nfrom .blocks import *\n".into()),
        (dir.join("net/encoder.py"), format!(
            "import torch.nn as nn\nfrom .blocks import {}\n\n\nclass Encoder(nn.Module):\n    def __init__(self, dim):\n        super().__init__()\n        self.blocks = nn.Sequential({})\n\n    def forward(self, x):\n        return self.blocks(x)\n",
            (0..BLOCKS).map(|i| format!("Block{i}")).collect::<Vec<_>>().join(", "),
            (0..BLOCKS).map(|i| format!("Block{i}(dim)")).collect::<Vec<_>>().join(", "),
        )),
        (dir.join("net/blocks.py"), blocks_module()),
        (dir.join("net/utils.py"), "def count_parameters(model):\n    return sum(p.numel() for p in model.parameters())\n".into()),
        (layers.join("__init__.py"), String::new()),
    ];
    for i in 0..LAYERS {
        files.push((layers.join(format!("layer_{i}.py")), layer_module(i)));
    }
    for i in 0..TOOLS {
        files.push((
            tools.join(format!("tool_{i}.py")),
            format!("import torch\n\n\ndef tool_{i}(x):\n    return x.clone().mul_({i})\n"),
        ));
    }
    anyhow::ensure!(files.len() == 50, "{} files", files.len());
    for (p, t) in &files {
        std::fs::write(p, t)?;
    }
    Ok((dir.join("train.py"), dir.join("net/blocks.py")))
}

/// Edits in `net/blocks.py` measured.
const EDITS: i64 = 100;

/// Open `train.py` and `net/blocks.py`; toggle the block's `h = h + 1` / `h += 1` 100 times;
/// each time, the time until `train.py`'s diagnostics show the change.
pub fn edit_latency(binary: &Path, work: &Path, report: &mut Report) -> Result<()> {
    let dir = work.join("project50");
    let (train, blocks) = write_project(&dir)?;
    let uri = |p: &Path| format!("file://{}", p.canonicalize().unwrap_or(p.into()).display());
    let (train_uri, blocks_uri) = (uri(&train), uri(&blocks));
    let mut lsp = Lsp::start_in(binary, Some(&uri(&dir)))?;
    let train_text = std::fs::read_to_string(&train)?;
    let blocks_text = std::fs::read_to_string(&blocks)?;
    lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": train_uri, "languageId": "python", "version": 1, "text": train_text}}))?;
    let first = lsp.diagnostics(&train_uri, 1)?;
    let clean = first["params"]["diagnostics"]
        .as_array()
        .map_or(0, Vec::len);
    lsp.notify("textDocument/didOpen", json!({"textDocument": {"uri": blocks_uri, "languageId": "python", "version": 1, "text": blocks_text}}))?;
    lsp.diagnostics(&blocks_uri, 1)?;
    let line = blocks_text
        .lines()
        .position(|l| l.trim() == "h = h + 1")
        .context("no line to toggle")?;
    let mut latencies = Vec::new();
    for i in 0..EDITS {
        let hazard = i % 2 == 0;
        let new = if hazard {
            "        h += 1"
        } else {
            "        h = h + 1"
        };
        let old_len = if hazard { 17 } else { 14 };
        let t = Instant::now();
        lsp.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": blocks_uri, "version": i + 2},
                   "contentChanges": [{"range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": old_len}}, "text": new}]}),
        )?;
        let want = if hazard { clean + 1 } else { clean };
        lsp.wait(|m| {
            m["method"] == "textDocument/publishDiagnostics"
                && m["params"]["uri"] == train_uri.as_str()
                && m["params"]["diagnostics"].as_array().map_or(0, Vec::len) == want
        })?;
        latencies.push(t.elapsed());
    }
    lsp.stop();
    latencies.sort();
    report_latencies(
        report,
        "LSP edit in an imported module to the importer's new diagnostics (50-file project, 100 edits)",
        &latencies,
        "p99 < 50 ms",
        |p99, _| p99 < Duration::from_millis(50),
    );
    Ok(())
}
