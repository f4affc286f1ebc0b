//! `cargo xtask bench`: fetches the pinned corpus (`tests/bench/corpus.txt`: the `.py` files of
//! pinned wheels from PyPI) into `target/bench/corpus`, installs ruff (`tests/bench/
//! requirements.txt`) as the reference point, builds release binaries and runs
//! `crates/inplace_bench` on it. See the README's "Performance" section for the figures.

use crate::{cargo, root, run, venv_at};
use anyhow::{Context, Result};
use std::process::Command;

/// Unpacks the `.py` files of every wheel in `wheels` into `corpus/<wheel name>/`.
const EXTRACT: &str = r#"
import pathlib, sys, zipfile
wheels, corpus = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for whl in sorted(wheels.glob("*.whl")):
    dest = corpus / whl.stem
    with zipfile.ZipFile(whl) as z:
        for name in z.namelist():
            if name.endswith(".py"):
                z.extract(name, dest)
"#;

fn corpus(python: &std::path::Path) -> Result<std::path::PathBuf> {
    let root = root();
    let spec = std::fs::read_to_string(root.join("tests/bench/corpus.txt"))
        .context("reading tests/bench/corpus.txt")?;
    let dir = root.join("target/bench");
    let corpus = dir.join("corpus");
    let marker = dir.join(".corpus");
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(spec.as_str()) {
        return Ok(corpus);
    }
    let wheels = dir.join("wheels");
    let _ = std::fs::remove_dir_all(&wheels);
    let _ = std::fs::remove_dir_all(&corpus);
    run(Command::new(python)
        .args([
            "-m",
            "pip",
            "download",
            "-q",
            "--disable-pip-version-check",
            "--no-deps",
            "--only-binary=:all:",
            "-d",
        ])
        .arg(&wheels)
        .arg("-r")
        .arg(root.join("tests/bench/corpus.txt")))?;
    run(Command::new(python)
        .args(["-c", EXTRACT])
        .arg(&wheels)
        .arg(&corpus))?;
    std::fs::write(&marker, spec)?;
    Ok(corpus)
}

pub fn bench() -> Result<()> {
    let python = venv_at("target/bench-venv", "tests/bench/requirements.txt")?;
    let corpus = corpus(&python)?;
    run(cargo().args([
        "build",
        "--release",
        "-q",
        "-p",
        "inplace_lsp",
        "-p",
        "inplace_bench",
    ]))?;
    let root = root();
    let ruff = python.with_file_name("ruff");
    let mut cmd = Command::new(root.join("target/release/inplace_bench"));
    cmd.arg("--corpus")
        .arg(&corpus)
        .arg("--binary")
        .arg(root.join("target/release/inplace-lsp"))
        .arg("--root")
        .arg(&root);
    if ruff.exists() {
        cmd.arg("--ruff").arg(ruff);
    }
    run(&mut cmd)
}
