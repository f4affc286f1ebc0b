//! What the binary's integration tests share: running `inplace-lsp`, reading its JSON, and
//! scratch folders of files.
#![allow(dead_code)]

use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_inplace-lsp"))
}

pub fn run(args: &[&str], dir: &Path) -> Output {
    bin().args(args).current_dir(dir).output().unwrap()
}

pub fn run_stdin(args: &[&str], dir: &Path, input: &[u8]) -> Output {
    let mut child = bin()
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

pub fn json(out: &Output) -> Vec<Value> {
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
        .as_array()
        .unwrap()
        .clone()
}

/// A scratch folder holding `files` (name, text).
pub fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let p = dir.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}
