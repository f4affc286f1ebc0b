//! Developer tasks: `cargo xtask test | venv | oracle | lsp-client | gen-ops [--check] | vsix |
//! editors | packaging | fuzz [--time SECONDS] [TARGET ...] | bench`.
//!
//! `test` is the whole suite (what `.ci/run` and the README run): formatting, clippy, every
//! Rust test, then the runtime oracle under a real torch (provisioned in `target/venv` from
//! `tests/oracle/requirements.txt`), a check that the committed op table still matches torch, and
//! the wheel and the pre-commit hooks as a user gets them (`packaging.rs`), the end-to-end tests
//! in a real Neovim and a real VS Code (`editors.rs`), and a short run of each fuzz target
//! (`fuzz.rs`).

mod bench;
mod editors;
mod fuzz;
mod packaging;

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root")
}

fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("xtask: running {cmd:?}");
    if cmd.get_current_dir().is_none() {
        cmd.current_dir(root());
    }
    let status = cmd
        .status()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

/// The venv's python, created and filled from requirements.txt when missing or stale.
fn venv() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("INPLACE_PYTHON") {
        return Ok(PathBuf::from(p));
    }
    venv_at("target/venv", "tests/oracle/requirements.txt")
}

/// A venv under `dir` holding `requirements` (both relative to the root), made or refreshed when
/// the requirements changed since it was filled. Returns its python.
fn venv_at(dir: &str, requirements: &str) -> Result<PathBuf> {
    let root = root();
    let dir = root.join(dir);
    let python = dir.join("bin/python");
    let wanted = std::fs::read_to_string(root.join(requirements))
        .with_context(|| format!("reading {requirements}"))?;
    let marker = dir.join(".inplace-requirements");
    if python.exists() && std::fs::read_to_string(&marker).ok().as_deref() == Some(wanted.as_str())
    {
        return Ok(python);
    }
    let system = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    run(Command::new(&system).args(["-m", "venv"]).arg(&dir))?;
    run(Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "-q",
            "-r",
        ])
        .arg(root.join(requirements)))?;
    std::fs::write(&marker, wanted)?;
    Ok(python)
}

/// Every fixture under real torch, with its fixes applied and re-run; and the harness's own
/// test (a wrong expectation must fail it).
fn oracle() -> Result<()> {
    let python = venv()?;
    run(cargo().args(["build", "-q", "-p", "inplace_lsp"]))?;
    let binary = root().join("target/debug/inplace-lsp");
    run(Command::new(&python)
        .arg("tests/oracle/test_harness.py")
        .arg(&binary))?;
    run(Command::new(&python)
        .args(["tests/oracle/run_fixtures.py", "tests/fixtures", "--binary"])
        .arg(&binary))
}

/// The chapter's runnable examples (`tests/fixtures/chapter/*.py`), in order.
fn chapter_examples() -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("tests/fixtures/chapter"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "py"))
        .collect();
    files.sort();
    Ok(files)
}

/// The language server driven by a real LSP client library (pygls) on the chapter's examples.
fn lsp_client() -> Result<()> {
    let python = venv()?;
    run(cargo().args(["build", "-q", "-p", "inplace_lsp"]))?;
    let mut files = chapter_examples()?;
    files.push(root().join("tests/fixtures/ip401/data_clamp_before_backward.py"));
    files.push(root().join("tests/fixtures/ip402/alias_then_add.py"));
    run(Command::new(&python)
        .arg("tests/lsp/chapter_client.py")
        .arg(root().join("target/debug/inplace-lsp"))
        .args(files))
}

fn gen_ops(check: bool) -> Result<()> {
    let python = venv()?;
    let mut cmd = Command::new(&python);
    cmd.arg("tests/oracle/gen_op_table.py");
    if check {
        cmd.arg("--check");
    }
    run(cmd.arg("crates/inplace_analysis/data/ops.json"))
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

fn test() -> Result<()> {
    run(cargo().args(["fmt", "--all", "--", "--check"]))?;
    run(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    run(cargo()
        .args(["test", "--workspace"])
        .env("INSTA_UPDATE", "no"))?;
    // The large pathological inputs (10 MB, 100,000 lines, a 1 MB line) at release speed.
    run(cargo().args([
        "test",
        "--release",
        "-p",
        "inplace_analysis",
        "--test",
        "pathological",
        "--",
        "--include-ignored",
    ]))?;
    oracle()?;
    lsp_client()?;
    gen_ops(true)?;
    packaging::packaging()?;
    editors::editors()?;
    // Short bounded runs; `cargo xtask fuzz --time 1800` is the long one.
    fuzz::fuzz(20, &[])?;
    eprintln!("xtask: the whole suite passed");
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["test"] => test(),
        ["venv"] => venv().map(|p| println!("{}", p.display())),
        ["oracle"] => oracle(),
        ["lsp-client"] => lsp_client(),
        ["gen-ops"] => gen_ops(false),
        ["gen-ops", "--check"] => gen_ops(true),
        ["vsix"] => editors::vsix(),
        ["bench"] => bench::bench(),
        ["fuzz", rest @ ..] => {
            let (seconds, targets) = match rest {
                ["--time", n, targets @ ..] => (n.parse().context("--time SECONDS")?, targets),
                targets => (60, targets),
            };
            let targets: Vec<String> = targets.iter().map(|s| s.to_string()).collect();
            fuzz::fuzz(seconds, &targets)
        }
        ["editors"] => editors::editors(),
        ["packaging"] => packaging::packaging(),
        _ => {
            eprintln!("usage: cargo xtask <test | venv | oracle | lsp-client | gen-ops [--check] | vsix | editors | packaging | fuzz [--time SECONDS] [TARGET ...] | bench>");
            std::process::exit(2);
        }
    }
}
