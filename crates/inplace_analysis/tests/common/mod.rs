//! What the test files of this crate share (each uses some of it).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// `tests/fixtures` at the top of the repository.
pub fn fixtures_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// Every fixture (`.py` under [`fixtures_root`]), sorted.
pub fn fixture_files() -> Vec<PathBuf> {
    files_with("py")
}

/// The fixture files whose name ends in `.{ext}`, sorted. Projects (`tests/fixtures/projects`,
/// several files analysed together) are the binary's tests: they need its module resolution.
pub fn files_with(ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![fixtures_root()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() && p.file_name().is_some_and(|n| n == "projects") {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == ext) {
                out.push(p);
            }
        }
    }
    out.sort();
    assert!(
        out.len() >= 5,
        "fixtures missing under {}",
        fixtures_root().display()
    );
    out
}

/// The codes of the findings `text` gets, in order.
pub fn codes(text: &str) -> Vec<&'static str> {
    inplace_analysis::analyze_text(text)
        .findings
        .iter()
        .map(|f| f.rule.code())
        .collect()
}

/// The codes of the findings that start where `needle` first occurs in `text`.
pub fn codes_at(text: &str, needle: &str) -> Vec<&'static str> {
    let start = text.find(needle).expect("the line");
    inplace_analysis::analyze_text(text)
        .findings
        .iter()
        .filter(|f| f.range.start == start)
        .map(|f| f.rule.code())
        .collect()
}
