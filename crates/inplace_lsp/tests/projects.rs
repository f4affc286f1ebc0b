//! Projects: `tests/fixtures/projects/<name>/`, an entry script (`run_*.py`) and the modules it
//! imports. `check` on the entry resolves the project's imports; the findings are exactly the
//! entry's `# expect:` lines, and related locations in other files name those files.

mod common;

use common::{json, project, run};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn projects_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/projects")
}

/// (1-based line, code) pairs from `# expect:` comments.
fn expectations(text: &str) -> BTreeSet<(u64, String)> {
    let mut out = BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(at) = line.find("# expect:") {
            for code in line[at + 9..].split([',', ' ']).filter(|c| !c.is_empty()) {
                out.insert((i as u64 + 1, code.trim().to_string()));
            }
        }
    }
    out
}

fn entries() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in std::fs::read_dir(projects_root()).unwrap() {
        let dir = p.unwrap().path();
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with("run_") && name.ends_with(".py") {
                out.push(f);
            }
        }
    }
    out.sort();
    assert!(out.len() >= 15, "project fixtures missing");
    out
}

#[test]
fn every_project_entry_has_exactly_its_expected_findings() {
    let mut table = Vec::new();
    for entry in entries() {
        let dir = entry.parent().unwrap();
        let name = entry.file_name().unwrap().to_str().unwrap();
        let out = run(
            &["check", "--isolated", "--output-format", "json", name],
            dir,
        );
        let findings = json(&out);
        let got: BTreeSet<(u64, String)> = findings
            .iter()
            .map(|f| {
                (
                    f["range"]["start"]["line"].as_u64().unwrap(),
                    f["code"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let want = expectations(&std::fs::read_to_string(&entry).unwrap());
        let at = entry.strip_prefix(projects_root()).unwrap().display();
        for (line, code) in want.difference(&got) {
            table.push(format!("{at}:{line}  missing {code}"));
        }
        for (line, code) in got.difference(&want) {
            table.push(format!("{at}:{line}  unexpected {code}"));
        }
        // Every finding stays in the entry; related paths are files of the project.
        for f in &findings {
            assert_eq!(f["path"], name);
            for r in f["related"].as_array().unwrap() {
                let path = r["path"].as_str().unwrap();
                assert!(dir.join(path).is_file(), "{at}: related path {path}");
            }
        }
    }
    assert!(
        table.is_empty(),
        "project disagreements:\n{}",
        table.join("\n")
    );
}

const MODELS: &str = "import torch\nimport torch.nn as nn\n\n\nclass Gate(nn.Module):\n    \
    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 4)\n\n    \
    def forward(self, x):\n        return torch.sigmoid(self.fc(x))\n";

const TRAIN: &str = "import torch\nfrom pkg.models import Gate\n\nh = Gate()(torch.randn(2, 4))\n\
    h += 1\nh.sum().backward()\n";

fn related_in(f: &Value, path: &str) -> Value {
    f["related"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == path)
        .cloned()
        .unwrap_or_else(|| panic!("no related location in {path}: {f}"))
}

#[test]
fn related_locations_name_the_module_file_in_every_format() {
    let dir = project(&[
        ("pkg/__init__.py", ""),
        ("pkg/models.py", MODELS),
        ("train.py", TRAIN),
    ]);
    let out = run(
        &["check", "--output-format", "json", "train.py"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    let f = &json(&out)[0];
    assert_eq!(f["code"], "IP301");
    assert_eq!(f["range"]["start"]["line"], 5);
    let r = related_in(f, "pkg/models.py");
    assert_eq!(r["range"]["start"]["line"], 11);
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("pkg/models.py, line 11"),
        "{f}"
    );

    let text = run(&["check", "--color", "never", "train.py"], dir.path());
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("::: pkg/models.py:11:"), "{text}");

    let sarif = run(
        &["check", "--output-format", "sarif", "train.py"],
        dir.path(),
    );
    let sarif: Value = serde_json::from_slice(&sarif.stdout).unwrap();
    let related = &sarif["runs"][0]["results"][0]["relatedLocations"];
    assert!(related
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["physicalLocation"]["artifactLocation"]["uri"] == "pkg/models.py"));

    let github = run(
        &["check", "--output-format", "github", "train.py"],
        dir.path(),
    );
    let github = String::from_utf8_lossy(&github.stdout);
    assert!(
        github.contains("saved its output for backward here: pkg/models.py:11)"),
        "{github}"
    );

    // Named from another folder, the module's path is named from there too.
    let parent = dir.path().parent().unwrap();
    let name = dir.path().file_name().unwrap().to_str().unwrap();
    let out = run(
        &[
            "check",
            "--output-format",
            "json",
            &format!("{name}/train.py"),
        ],
        parent,
    );
    let f = &json(&out)[0];
    related_in(f, &format!("{name}/pkg/models.py"));
}

#[test]
fn unreadable_or_broken_modules_stay_opaque() {
    let dir = project(&[
        ("models.py", "import torch\ndef broken(:\n    pass\n"),
        (
            "train.py",
            "import torch\nimport models\nfrom binary import f\n\nx = models.broken(torch.randn(2))\nx.add_(1)\n",
        ),
    ]);
    std::fs::write(dir.path().join("binary.py"), b"\x00\x01\xff").unwrap();
    let out = run(
        &["check", "--output-format", "json", "train.py"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(json(&out).is_empty());
}

#[test]
fn fixes_of_writes_in_another_file_edit_the_calling_file() {
    let helper = "def normalize_(t):\n    t /= t.sum()\n    return t\n\ndef gate(t):\n    return t.sigmoid_()\n\ndef reset_(t):\n    t.zero_()\n";
    let train = "import torch\nfrom utils import normalize_, gate, reset_\n\nlogits = torch.randn(5, requires_grad=True)\nprobs = torch.exp(logits)\nnormalize_(probs)\nfeatures = torch.randn(3)\ngated = gate(features)\nw = torch.randn(3, requires_grad=True)\nreset_(w)\nloss = (probs * gated.sum() * features.sum()).sum()\nloss.backward()\n";
    let dir = project(&[("utils.py", helper), ("train.py", train)]);
    let out = run(
        &["check", "--isolated", "--fix", "--unsafe-fixes", "train.py"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let fixed = std::fs::read_to_string(dir.path().join("train.py")).unwrap();
    // Form ③: a copy is bound before the call, so later reads see what the helper wrote.
    assert!(
        fixed.contains("probs = probs.clone()\nnormalize_(probs)\n"),
        "{fixed}"
    );
    // IP402: the call is passed a copy, so `features` keeps its values.
    assert!(
        fixed.contains("gated = gate(features.clone())\n"),
        "{fixed}"
    );
    // IP101: the call runs under no_grad.
    assert!(
        fixed.contains("with torch.no_grad():\n    reset_(w)\n"),
        "{fixed}"
    );
    // The module is never edited.
    let module = std::fs::read_to_string(dir.path().join("utils.py")).unwrap();
    assert_eq!(module, helper);
}

#[test]
fn a_hazard_inside_a_checked_module_is_reported_once_there() {
    let blocks = "import torch.nn as nn\n\n\nclass Gate(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.gate = nn.Sigmoid()\n        self.act = nn.ReLU(inplace=True)\n\n    def forward(self, x):\n        return self.act(self.gate(x))\n";
    let train = "import torch\nfrom blocks import Gate\n\nnet = Gate()\nnet(torch.randn(2, 4, requires_grad=True)).sum().backward()\n";
    let dir = project(&[("blocks.py", blocks), ("run_train.py", train)]);
    let codes = |args: &[&str]| -> Vec<(String, String)> {
        let out = run(args, dir.path());
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        (json(&out).iter())
            .map(|f| {
                (
                    f["path"].as_str().unwrap().to_string(),
                    f["code"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    // The entry alone: reported at the call, naming the module's write.
    let alone = codes(&[
        "check",
        "--isolated",
        "--output-format",
        "json",
        "run_train.py",
    ]);
    assert_eq!(alone, [("run_train.py".to_string(), "IP303".to_string())]);
    // Both files checked: once, in the module, where the fix is.
    let both = codes(&[
        "check",
        "--isolated",
        "--output-format",
        "json",
        "blocks.py",
        "run_train.py",
    ]);
    assert_eq!(both, [("blocks.py".to_string(), "IP303".to_string())]);
}
