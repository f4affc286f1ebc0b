//! `cargo xtask packaging`: the Python wheel and the pre-commit hooks, as a user gets them.
//!
//! Builds the wheel with maturin (`crates/inplace_lsp/pyproject.toml`), installs it into a fresh
//! venv, and runs from there `inplace-lsp --version`, `check` on the demo and an LSP session over
//! stdio that syncs the demo notebook. Then runs pre-commit (from PyPI) with `try-repo` against a
//! temporary git repository holding a hazard: the hook fails and prints the finding, the fix
//! hook repairs it, and the hook then passes.

use crate::{root, run, venv_at};
use anyhow::{bail, ensure, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn output(cmd: &mut Command) -> Result<Output> {
    eprintln!("xtask: running {cmd:?}");
    cmd.output()
        .with_context(|| format!("cannot start {cmd:?}"))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Build the wheel; its path.
fn build_wheel(tools: &Path) -> Result<PathBuf> {
    let root = root();
    let out = root.join("target/wheels");
    if out.exists() {
        std::fs::remove_dir_all(&out)?;
    }
    run(Command::new(tools.join("maturin"))
        .args([
            "build",
            "--release",
            "-q",
            "-m",
            "crates/inplace_lsp/Cargo.toml",
            "--out",
        ])
        .arg(&out))?;
    let wheels: Vec<PathBuf> = std::fs::read_dir(&out)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    match wheels.as_slice() {
        [one] => Ok(one.clone()),
        _ => bail!("expected one wheel in {}, found {wheels:?}", out.display()),
    }
}

/// A fresh venv with only the wheel installed; its `bin` folder.
fn install(wheel: &Path) -> Result<PathBuf> {
    let env = root().join("target/wheel-test");
    if env.exists() {
        std::fs::remove_dir_all(&env)?;
    }
    let system = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    run(Command::new(&system).args(["-m", "venv"]).arg(&env))?;
    let bin = env.join("bin");
    run(Command::new(bin.join("python"))
        .args([
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--no-index",
        ])
        .arg(wheel))?;
    Ok(bin)
}

/// The installed binary works: version, `check` on the demo, notebook sync over stdio.
fn smoke(bin: &Path, tools: &Path) -> Result<()> {
    let exe = bin.join("inplace-lsp");
    let v = output(Command::new(&exe).arg("--version"))?;
    let want = format!("inplace-lsp {}", env!("CARGO_PKG_VERSION"));
    ensure!(
        v.status.success() && text(&v).trim() == want,
        "--version: {}",
        text(&v)
    );
    let demo = output(
        Command::new(&exe)
            .args(["check", "tests/demo/hazards.py", "--color", "never"])
            .current_dir(root()),
    )?;
    ensure!(
        demo.status.code() == Some(1) && text(&demo).contains("Found "),
        "check on the demo: {:?}\n{}",
        demo.status,
        text(&demo)
    );
    run(Command::new(tools.join("python"))
        .arg("tests/packaging/stdio_notebook.py")
        .arg(&exe)
        .arg("tests/demo/notebook.ipynb"))
}

const HAZARD: &str = "import torch\n\nx = torch.randn(3, requires_grad=True)\ny = torch.sigmoid(x)\ny += 1\ny.sum().backward()\n";

/// pre-commit's `try-repo` on this repository's hooks, in a scratch git repository.
fn pre_commit(bin: &Path, tools: &Path) -> Result<()> {
    let root = root();
    let repo = root.join("target/tmp/pre-commit-repo");
    if repo.exists() {
        std::fs::remove_dir_all(&repo)?;
    }
    std::fs::create_dir_all(&repo)?;
    std::fs::write(repo.join("train.py"), HAZARD)?;
    std::fs::copy(
        root.join("tests/demo/notebook.ipynb"),
        repo.join("explore.ipynb"),
    )?;
    let path = format!(
        "{}:{}:{}",
        bin.display(),
        tools.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let cmd = |program: &Path| {
        let mut c = Command::new(program);
        c.current_dir(&repo)
            .env("PATH", &path)
            .env("PRE_COMMIT_HOME", root.join("target/tmp/pre-commit-home"))
            .env("GIT_AUTHOR_NAME", "xtask")
            .env("GIT_AUTHOR_EMAIL", "xtask@localhost")
            .env("GIT_COMMITTER_NAME", "xtask")
            .env("GIT_COMMITTER_EMAIL", "xtask@localhost");
        c
    };
    let git = PathBuf::from("git");
    run(cmd(&git).args(["init", "-q"]))?;
    run(cmd(&git).args(["add", "."]))?;
    let try_repo = |hook: &str| -> Result<Output> {
        output(
            cmd(&tools.join("pre-commit"))
                .args(["try-repo", "--all-files"])
                .arg(&root)
                .arg(hook),
        )
    };
    let found = try_repo("inplace-lsp")?;
    let said = text(&found);
    ensure!(
        !found.status.success()
            && said.contains("train.py:5:1")
            && said.contains("explore.ipynb:cell 5:2:1")
            && said.contains("IP301"),
        "the hook must fail and print both findings:\n{said}"
    );
    let fixed = try_repo("inplace-lsp-fix")?;
    ensure!(
        !fixed.status.success() && text(&fixed).contains("files were modified by this hook"),
        "the fix hook must change the files:\n{}",
        text(&fixed)
    );
    ensure!(
        std::fs::read_to_string(repo.join("train.py"))?.contains("y = y + 1"),
        "train.py was not fixed"
    );
    run(cmd(&git).args(["add", "."]))?;
    let clean = try_repo("inplace-lsp")?;
    ensure!(
        clean.status.success(),
        "after the fix the hook must pass:\n{}",
        text(&clean)
    );
    eprintln!("xtask: pre-commit hooks fail on the hazard, fix it, then pass");
    Ok(())
}

pub fn packaging() -> Result<()> {
    let python = venv_at("target/packaging-venv", "tests/packaging/requirements.txt")?;
    let tools = python.parent().context("venv bin")?.to_path_buf();
    let wheel = build_wheel(&tools)?;
    eprintln!("xtask: built {}", wheel.display());
    // The README is the package's long description.
    run(Command::new(tools.join("python")).args([
        "-c",
        "import sys, zipfile\n\
         z = zipfile.ZipFile(sys.argv[1])\n\
         m = next(n for n in z.namelist() if n.endswith('.dist-info/METADATA'))\n\
         meta = z.read(m).decode()\n\
         assert 'Description-Content-Type: text/markdown' in meta, meta[:800]\n\
         assert open('README.md', encoding='utf-8').read().strip()[:200] in meta, 'README missing'\n",
    ]).arg(&wheel))?;
    let bin = install(&wheel)?;
    smoke(&bin, &tools)?;
    pre_commit(&bin, &tools)
}
