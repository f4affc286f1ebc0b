//! `inplace-lsp check` on Jupyter notebooks through the real binary.

mod common;

use common::{project as with_files, run, run_stdin};
use serde_json::Value;
use std::path::Path;
use std::process::Output;

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The bundled demo notebook: a sigmoid's output made in cell 3, scaled in place in cell 5
/// (after a `!shell` line), `backward()` in cell 6; markdown cells in between.
const DEMO: &str = include_str!("../../../tests/demo/notebook.ipynb");

/// A notebook in nbformat's own layout (one-space indent, as `json.dumps(indent=1)` writes).
fn notebook(cells: &[(&str, &str)]) -> String {
    let cells: Vec<Value> = cells
        .iter()
        .map(|(kind, src)| {
            let lines: Vec<&str> = src.split_inclusive('\n').collect();
            if *kind == "code" {
                serde_json::json!({"cell_type": "code", "execution_count": null, "metadata": {},
                                   "outputs": [], "source": lines})
            } else {
                serde_json::json!({"cell_type": kind, "metadata": {}, "source": lines})
            }
        })
        .collect();
    let nb =
        serde_json::json!({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5});
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b" ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    serde::Serialize::serialize(&nb, &mut ser).unwrap();
    String::from_utf8(out).unwrap() + "\n"
}

#[test]
fn findings_name_their_cell_and_count_lines_within_it() {
    let dir = with_files(&[("demo.ipynb", DEMO)]);
    let out = run(
        &["check", "demo.ipynb", "--output-format", "json"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let v: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v.len(), 1, "{v:#?}");
    let f = &v[0];
    assert_eq!(f["code"], "IP301");
    assert_eq!(f["path"], "demo.ipynb");
    assert_eq!(f["cell"], 5);
    assert_eq!(
        f["range"],
        serde_json::json!({"start": {"line": 2, "column": 1}, "end": {"line": 2, "column": 7}})
    );
    let message = f["message"].as_str().unwrap();
    assert!(message.contains("(cell 3, line 2)"), "{message}");
    assert!(message.contains("(cell 6, line 2)"), "{message}");
    let related = f["related"].as_array().unwrap();
    assert!(related
        .iter()
        .any(|r| r["cell"] == 3 && r["range"]["start"]["line"] == 2));
    assert!(related
        .iter()
        .any(|r| r["cell"] == 6 && r["range"]["start"]["line"] == 2));
    let edit = &f["fix"]["edits"][0];
    assert_eq!(edit["cell"], 5);
    assert_eq!(edit["content"], "h = h * 2");

    let text = run(&["check", "demo.ipynb"], dir.path());
    let text = stdout(&text);
    assert!(text.contains("--> demo.ipynb:cell 5:2:1"), "{text}");
    assert!(text.contains("demo.ipynb:cell 3:2:5"), "{text}");
    assert!(text.contains("2 | h *= 2"), "{text}");

    let gh = stdout(&run(
        &["check", "demo.ipynb", "--output-format", "github"],
        dir.path(),
    ));
    assert!(
        gh.starts_with("::error title=inplace-lsp (IP301 saved-output-inplace),file=demo.ipynb,line=2,col=1,endLine=2,endColumn=7::cell 5: IP301 "),
        "{gh}"
    );
    let sarif: Value = serde_json::from_slice(
        &run(
            &["check", "demo.ipynb", "--output-format", "sarif"],
            dir.path(),
        )
        .stdout,
    )
    .unwrap();
    let region = &sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"];
    assert_eq!(region["startLine"], 2);
    assert_eq!(region["properties"]["cell"], 5);
}

#[test]
fn fix_rewrites_only_the_changed_cell_source_and_keeps_the_layout() {
    let dir = with_files(&[("demo.ipynb", DEMO)]);
    let diff = run(&["check", "demo.ipynb", "--diff"], dir.path());
    assert_eq!(diff.status.code(), Some(1));
    let d = stdout(&diff);
    assert!(
        d.contains("--- demo.ipynb:cell 5\n+++ demo.ipynb:cell 5\n"),
        "{d}"
    );
    assert!(d.contains("-h *= 2\n+h = h * 2\n"), "{d}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("demo.ipynb")).unwrap(),
        DEMO,
        "--diff writes nothing"
    );
    let out = run(&["check", "demo.ipynb", "--fix"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let after = std::fs::read_to_string(dir.path().join("demo.ipynb")).unwrap();
    assert_eq!(after, DEMO.replacen("\"h *= 2\\n\"", "\"h = h * 2\\n\"", 1));
    let again = run(&["check", "demo.ipynb"], dir.path());
    assert_eq!(again.status.code(), Some(0), "{}", stdout(&again));
}

#[test]
fn an_unsafe_fix_that_adds_a_line_lands_in_its_cell() {
    // The clone goes into the cell of the write, above it; the cells around stay as they were
    // (their sources byte for byte, including a source with no final line break).
    let nb = notebook(&[
        (
            "code",
            "import torch\nx = torch.randn(3, requires_grad=True)\ny = torch.sigmoid(x)",
        ),
        ("markdown", "Write the first element:"),
        ("code", "y[0] = 0.0\n"),
        ("code", "y.sum().backward()"),
    ]);
    let dir = with_files(&[("nb.ipynb", &nb)]);
    let out = run(
        &[
            "check",
            "nb.ipynb",
            "--fix",
            "--unsafe-fixes",
            "--output-format",
            "json",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let after = std::fs::read_to_string(dir.path().join("nb.ipynb")).unwrap();
    let expected = nb.replacen(
        "    \"y[0] = 0.0\\n\"",
        "    \"y = y.clone()\\n\",\n    \"y[0] = 0.0\\n\"",
        1,
    );
    assert_eq!(after, expected);
}

#[test]
fn a_fix_that_would_not_fix_is_not_shown_in_a_notebook() {
    // (As in a Python file: the copy of a split's base leaves both halves views of one memory;
    // `--fix` rejects it, so the JSON gives the finding with no fix.)
    let nb = notebook(&[
        (
            "code",
            "import torch\n\n\ndef split_at_index(index, t):\n    return t[:, :index], t[:, index:]\n",
        ),
        ("code", "w = torch.randn(4, 6, requires_grad=True)\nx = w * 2\nlq, q = split_at_index(3, x)\ny = lq.sin()\n"),
        ("code", "q[:, :1] = 0.0\n(y.sum() + q.sum()).backward()\n"),
    ]);
    let dir = with_files(&[("split.ipynb", &nb)]);
    let out = run(
        &["check", "split.ipynb", "--output-format", "json"],
        dir.path(),
    );
    let v: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v.len(), 1, "{}", stdout(&out));
    assert_eq!(v[0]["code"], "IP302");
    assert_eq!(v[0]["cell"], 3);
    assert!(v[0]["fix"].is_null(), "{}", stdout(&out));
}

#[test]
fn ipython_syntax_is_not_parsed_and_not_touched() {
    let nb = notebook(&[
        ("code", "%%time\nthis is not python(\n"),
        ("code", "%load_ext autoreload\nimport torch\nfiles = !ls\nx = torch.ones(2, requires_grad=True)\n"),
        ("code", "torch.nn.functional.relu?\nx.mul_(2)\n"),
    ]);
    let dir = with_files(&[("nb.ipynb", &nb)]);
    let out = run(
        &["check", "nb.ipynb", "--output-format", "json"],
        dir.path(),
    );
    let v: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(v[0]["code"], "IP101");
    assert_eq!(v[0]["cell"], 3);
    assert_eq!(v[0]["range"]["start"]["line"], 2);
}

#[test]
fn folders_include_notebooks_and_a_broken_one_does_not_stop_the_others() {
    let dir = with_files(&[
        ("a/demo.ipynb", DEMO),
        ("a/broken.ipynb", "{\"cells\": [\n"),
        ("a/empty.ipynb", "{\"cells\": [], \"metadata\": {}}"),
        ("a/r.ipynb", "{\"cells\": [{\"cell_type\": \"code\", \"source\": \"x <- 1\"}], \"metadata\": {\"kernelspec\": {\"language\": \"R\"}}}"),
    ]);
    let out = run(&["check", "a", "--output-format", "json"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("broken.ipynb: not a valid notebook"), "{err}");
    assert!(
        err.contains("empty.ipynb: the notebook has no cells"),
        "{err}"
    );
    assert!(!err.contains("r.ipynb"), "{err}");
    let v: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v.len(), 1);
    assert_eq!(
        v[0]["path"],
        Path::new("a").join("demo.ipynb").display().to_string()
    );
}

#[test]
fn hostile_notebooks_get_a_clear_error() {
    let deep = format!(
        "{{\"cells\": {}{}}}",
        "[".repeat(200_000),
        "]".repeat(200_000)
    );
    let dir = with_files(&[("deep.ipynb", &deep), ("ok.ipynb", DEMO)]);
    std::fs::write(dir.path().join("binary.ipynb"), [0xff, 0xfe, 0x00, 0x9c]).unwrap();
    let out = run(&["check", ".", "--output-format", "json"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("deep.ipynb: not a valid notebook: Maximum nesting depth"),
        "{err}"
    );
    assert!(err.contains("binary.ipynb: not valid UTF-8"), "{err}");
    let v: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v.len(), 1, "the good notebook is still checked");
}

#[test]
fn stdin_with_a_notebook_name_is_read_as_a_notebook() {
    let out = run_stdin(
        &["check", "-", "--stdin-filename", "x.ipynb", "--fix"],
        Path::new("."),
        DEMO.as_bytes(),
    );
    assert_eq!(
        stdout(&out),
        DEMO.replacen("\"h *= 2\\n\"", "\"h = h * 2\\n\"", 1)
    );
}
